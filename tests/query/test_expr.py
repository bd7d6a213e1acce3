"""Column names, quantities and the filter-string parser of pipeline.query.expr."""

from __future__ import annotations

import pandas as pd
import pytest

from pipeline.query.expr import compile_filter
from pipeline.query.filter_parse import FilterSyntaxError
from pipeline.query.quantity import ColumnError, normalize, parse_quantity, resolve


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("bytes written", "bytes_written"),
        ("Bytes Written", "bytes_written"),
        ("bytes-written", "bytes_written"),
        ("  node   count ", "node_count"),
        ("small_1k_ratio", "small_1k_ratio"),
        ("job - id", "job_id"),
    ],
)
def test_normalize(name: str, expected: str) -> None:
    assert normalize(name) == expected


def test_resolve_unknown_column_lists_the_available_ones() -> None:
    with pytest.raises(KeyError) as info:
        resolve("node count", ["job_id", "bytes_written"], "project")
    err = info.value
    assert isinstance(err, ColumnError)
    assert err.available == ("job_id", "bytes_written")
    assert str(err) == ("unknown column 'node count' (project); available: job_id, bytes_written")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", 0.0),
        ("1GB", 1e9),
        ("1 GB", 1e9),
        ("1gb", 1e9),
        ("10GB", 1e10),
        ("1.5GiB", 1.5 * 2**30),
        ("2KiB", 2048.0),
        ("3kB", 3000.0),
        ("3KB", 3000.0),
        ("4MiB", 4 * 2**20),
        ("1TiB", 2.0**40),
        ("1PB", 1e15),
        ("7B", 7.0),
        ("2k", 2000.0),
        ("2K", 2000.0),
        ("5M", 5e6),
        ("1G", 1e9),
        ("1GB/s", 1e9),
        ("1e3", 1000.0),
        ("-2", -2.0),
        (".5MB", 5e5),
    ],
)
def test_parse_quantity(text: str, value: float) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["1m", "1g", "1Gbit", "GB", "", "1 2", "one"])
def test_parse_quantity_rejects(text: str) -> None:
    with pytest.raises(ValueError, match=repr(text).replace(".", r"\.") if text else "number"):
        parse_quantity(text)


@pytest.fixture
def jobs() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "job_id": ["1001", "1002", "1003", "1004", None],
            "bytes_written": [5e8, 1e9, 2e10, 2**30, None],
            "pattern": ["1-1", "N-1", "N-1", "N-N", "N-M"],
            "no_io": [False, False, False, True, False],
            "nprocs": [1, 16, 1024, 64, 8],
            "timestamp": pd.to_datetime(
                [
                    "2024-03-05T08:00:00Z",
                    "2024-03-05T09:00:00Z",
                    "2024-03-05T10:00:00Z",
                    "2024-03-05T11:00:00Z",
                    "2024-03-05T12:00:00Z",
                ],
                utc=True,
            ),
        }
    )


def _rows(expr: str, df: pd.DataFrame) -> list[int]:
    mask = compile_filter(expr)(df)
    return [int(i) for i in df.index[mask]]


@pytest.mark.parametrize(
    ("expr", "rows"),
    [
        # 1GB is 10^9 bytes: exactly 1e9 is not below it, 2^30 (1 GiB) is above it
        ("bytes written < 1GB", [0]),
        ("bytes written <= 1GB", [0, 1]),
        ("bytes written < 1GiB", [0, 1]),
        ("bytes written <= 1 GiB", [0, 1, 3]),
        ("bytes written > 10GB", [2]),
        ("bytes written >= 1G", [1, 2, 3]),
        ("bytes_written == 500M", [0]),
        ("Bytes-Written != 0", [0, 1, 2, 3]),  # the missing value satisfies no comparison
        ("bytes written == null", [4]),
        ("bytes written != null", [0, 1, 2, 3]),
        ("pattern == 'N-1'", [1, 2]),
        ('pattern != "N-1"', [0, 3, 4]),
        ("pattern == N-1", [1, 2]),  # a bare word against a text column is text
        ("job id == 1003", [2]),  # a number against a keyword column compares as written
        ("no io == true", [3]),
        ("no_io == FALSE", [0, 1, 2, 4]),
        ("nprocs >= 1k", [2]),
        ("pattern == 'N-1' and nprocs > 100", [2]),
        ("pattern == 'N-N' or nprocs < 10", [0, 3, 4]),
        # and binds tighter than or
        ("nprocs < 10 or pattern == 'N-1' and nprocs > 100", [0, 2, 4]),
        ("(nprocs < 10 or pattern == 'N-1') and nprocs > 100", [2]),
        ("nprocs > 1 AND (pattern == 'N-N' OR pattern == '1-1')", [3]),
        ("timestamp >= '2024-03-05T10:00:00Z'", [2, 3, 4]),
        ("timestamp < '2024-03-05T11:00:00+01:00'", [0, 1]),
        ("timestamp == '2024-03-05T09:00:00'", [1]),  # no offset means UTC
    ],
)
def test_filter(expr: str, rows: list[int], jobs: pd.DataFrame) -> None:
    assert _rows(expr, jobs) == rows


@pytest.mark.parametrize(
    ("expr", "token", "position", "reason"),
    [
        ("bytes written < 1Gbit", "1Gbit", 16, "unknown unit 'Gbit'"),
        ("bytes written < 1 Gbit", "Gbit", 18, "expected 'and', 'or' or the end"),
        ("bytes written <", "", 15, "expected a value"),
        ("bytes written", "", 13, "expected a comparison operator"),
        ("< 1GB", "<", 0, "expected a column name"),
        ("bytes written < 1GB and", "", 23, "expected a column name"),
        ("bytes written < 1GB or or x > 1", "or", 23, "expected a column name"),
        ("pattern == 'N-1", "'N-1", 11, "unterminated quoted string"),
        ("nprocs = 4", "=", 7, "unexpected character"),
        ("(nprocs > 4", "", 11, "expected ')'"),
        ("nprocs > 4)", ")", 10, "expected 'and', 'or' or the end"),
        ("nprocs > 2024-03-05", "2024-03-05", 9, "not a number with a known unit"),
        ("", "", 0, "empty filter"),
    ],
)
def test_filter_syntax_errors_name_the_token(
    expr: str, token: str, position: int, reason: str
) -> None:
    with pytest.raises(FilterSyntaxError) as info:
        compile_filter(expr)
    err = info.value
    assert (err.token, err.position) == (token, position)
    assert reason in str(err)
    assert isinstance(err, ValueError)


@pytest.mark.parametrize(
    ("expr", "token", "reason"),
    [
        ("node count > 4", "node count", "unknown column 'node_count' (available: job_id,"),
        ("nprocs > abc", "abc", "'abc' is not a number"),
        ("nprocs < null", "null", "null only compares with == or !="),
        ("timestamp > 'yesterday'", "'yesterday'", "not an ISO-8601 time"),
    ],
)
def test_filter_errors_at_evaluation_name_the_token(
    expr: str, token: str, reason: str, jobs: pd.DataFrame
) -> None:
    mask = compile_filter(expr)  # parses
    with pytest.raises(FilterSyntaxError) as info:
        mask(jobs)
    assert info.value.token == token
    assert reason in str(info.value)


def test_filter_never_evaluates_user_text(jobs: pd.DataFrame) -> None:
    with pytest.raises(FilterSyntaxError, match="expected a comparison operator") as info:
        compile_filter("__import__('os').system('true') == 1")(jobs)
    assert (info.value.token, info.value.position) == ("(", 10)
