"""Bad input never crashes a parser (property-based): garbage, binary bytes, truncated and
mutated real lines, wrong column counts and types all end as a :class:`ParseError` naming the
file and line (or a record), never as another exception; good lines around bad ones still
parse."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.errors import ConfigError
from pipeline.formats.darshan.decode import parse_darshan_text
from pipeline.formats.events.decode import parse_event_line, perf_sched_events
from pipeline.formats.fio.decode import detect_layout, parse_lines
from pipeline.formats.lmt.decode import parse_lmt_csv
from pipeline.formats.slurm.decode import parse_sacct
from pipeline.formats.sysstat.decode import parse_sadf_csv
from pipeline.formats.sysstat.sadf_json import parse_sadf_json
from pipeline.parsers.errors import ParseError
from pipeline.records.event_schema import event_schema

DATA = Path(__file__).resolve().parents[1] / "data"
FIO = (DATA / "fio" / "samples" / "node01" / "randrw_clat_hist.1.log").read_bytes().splitlines()
SADF = (DATA / "sysstat" / "peer_clean_sadf_d.csv").read_bytes().splitlines()[:40]
SACCT = (DATA / "slurm" / "sacct_4478544.txt").read_bytes().splitlines()
LMT = (DATA / "lmt" / "snx11025_2018-01-28.csv").read_bytes().splitlines()[:40]
PERF = (DATA / "events" / "perf_sched_2threads.txt").read_bytes().splitlines()[:40]

pytestmark = pytest.mark.reliability
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def damaged(draw: st.DrawFn, lines: list[bytes]) -> list[bytes]:
    """Real lines, some of them damaged: cut, with bytes flipped, fields dropped or doubled,
    replaced by binary garbage, or emptied; and lines dropped or reordered."""
    out = list(lines)
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(out) - 1))
        line = out[i]
        how = draw(st.sampled_from(["cut", "flip", "drop_field", "double", "garbage", "empty"]))
        if how == "cut":
            line = line[: draw(st.integers(0, max(0, len(line) - 1)))]
        elif how == "flip" and line:
            j = draw(st.integers(0, len(line) - 1))
            line = line[:j] + bytes([draw(st.integers(0, 255))]) + line[j + 1 :]
        elif how == "drop_field":
            sep = b";" if b";" in line else (b"|" if b"|" in line else b",")
            parts = line.split(sep)
            del parts[draw(st.integers(0, len(parts) - 1))]
            line = sep.join(parts)
        elif how == "double":
            line = line + line
        elif how == "garbage":
            line = draw(st.binary(min_size=1, max_size=300)).replace(b"\n", b"")
        else:
            line = b""
        out[i] = line
    if draw(st.booleans()):
        i, j = draw(st.integers(0, len(out) - 1)), draw(st.integers(0, len(out) - 1))
        out[i], out[j] = out[j], out[i]
    return out


def consume(parsed: Iterable[Any]) -> tuple[int, list[ParseError]]:
    good, bad = 0, []
    for rec in parsed:
        if isinstance(rec, ParseError):
            bad.append(rec)
        else:
            good += 1
    return good, bad


def named(errors: list[ParseError], path: str, lines: int) -> None:
    for err in errors:
        assert err.path == path and 1 <= err.line_no <= lines, err
        assert err.reason


@FUZZ
@given(damaged(FIO))
def test_fio_histogram_lines(lines: list[bytes]) -> None:
    layout = detect_layout(FIO[0], "f.log")
    good, bad = consume(parse_lines(lines, layout, "f.log", 1))
    assert good + len(bad) == len(lines)
    named(bad, "f.log", len(lines))


@FUZZ
@given(damaged(SADF))
def test_sadf_csv(lines: list[bytes]) -> None:
    _good, bad = consume(parse_sadf_csv(lines, "d.csv"))
    named(bad, "d.csv", len(lines))


@FUZZ
@given(st.binary(max_size=2000) | damaged(SADF).map(b"\n".join))
def test_sadf_json(data: bytes) -> None:
    _good, bad = consume(parse_sadf_json(data, "d.json"))
    assert all(e.path == "d.json" and e.reason for e in bad)


@FUZZ
@given(damaged(SACCT))
def test_sacct(lines: list[bytes]) -> None:
    _good, bad = consume(parse_sacct(lines, "s.txt", tz=UTC))
    named(bad, "s.txt", len(lines))


@FUZZ
@given(damaged(LMT))
def test_lmt_csv(lines: list[bytes]) -> None:
    _good, bad = consume(parse_lmt_csv(lines, "l.csv"))
    named(bad, "l.csv", len(lines))


EVENT = b'{"ts":1783505753848,"ev":"ReqStart","pid":9104,"tid":9148,"conn":"c1"}'


@FUZZ
@given(damaged([EVENT] * 3) | st.lists(st.binary(max_size=200), min_size=1, max_size=5))
def test_event_lines(lines: list[bytes]) -> None:
    for n, line in enumerate(lines, start=1):
        try:
            e = parse_event_line(line, "e.jsonl", n)
        except ParseError as err:
            assert (err.path, err.line_no) == ("e.jsonl", n) and err.reason
        else:
            assert isinstance(e.ts_ns, int) and e.ts_ns >= 0 and isinstance(e.ev, str)


@FUZZ
@given(damaged(PERF))
def test_perf_script(lines: list[bytes]) -> None:
    try:
        for e in perf_sched_events(lines, "p.txt"):
            assert e.ev in ("CSwitch", "Wakeup")
    except ParseError as err:
        assert err.path == "p.txt" and 1 <= err.line_no <= len(lines)


DARSHAN_TEXT = [
    b"# darshan log version: 3.41",
    b"# exe: /bin/ior",
    b"# uid: 1000",
    b"# jobid: 42",
    b"# start_time: 1700000000",
    b"# end_time: 1700000100",
    b"# nprocs: 4",
    b"# run time: 100.0",
    b"POSIX\t0\t123\tPOSIX_OPENS\t2\t/scratch/f\t/scratch\tlustre",
    b"POSIX\t0\t123\tPOSIX_BYTES_READ\t4096\t/scratch/f\t/scratch\tlustre",
]


@FUZZ
@given(damaged(DARSHAN_TEXT))
def test_darshan_text(lines: list[bytes]) -> None:
    try:
        parse_darshan_text(lines, "j.txt")
    except ParseError as err:
        assert err.path == "j.txt" and err.reason


@FUZZ
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
        max_leaves=12,
    )
)
def test_event_schemas(data: Any) -> None:
    doc = {"events": data} if not isinstance(data, dict) else data
    try:
        event_schema(doc, "s.yaml")
    except ConfigError as err:
        assert "s.yaml" in str(err)


def test_good_lines_around_bad_ones_still_parse() -> None:
    layout = detect_layout(FIO[0], "f.log")
    lines = [FIO[0], b"\x00\xff garbage", FIO[1][: len(FIO[1]) // 2], FIO[2], b"", FIO[3]]
    out = list(parse_lines(lines, layout, "f.log", 1))
    assert [isinstance(r, ParseError) for r in out] == [False, True, True, False, True, False]
    assert [r.line_no for r in out if isinstance(r, ParseError)] == [2, 3, 5]
    want = list(parse_lines([FIO[0], FIO[2], FIO[3]], layout, "f.log", 1))

    def key(r: Any) -> tuple[Any, ...]:
        return (r.time_ms, r.ddir, r.bs, r.bin_idx.tolist(), r.counts.tolist())

    assert [key(r) for r in (out[0], out[3], out[5])] == [key(r) for r in want]


# -- binary inputs and the configuration -------------------------------------------------------

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"
SADC = (SHARED / "sysstat" / "sa_test").read_bytes()
BINARY = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))


@st.composite
def damaged_binary(draw: st.DrawFn, data: bytes) -> bytes:
    """A real binary file cut somewhere and/or with bytes flipped (most often in the first
    kilobyte, where the headers and maps are)."""
    out = bytearray(data)
    for _ in range(draw(st.integers(0, 4))):
        head = draw(st.booleans())
        at = draw(st.integers(0, min(len(out), 1024) - 1 if head else len(out) - 1))
        out[at] ^= draw(st.integers(1, 255))
    if draw(st.booleans()):
        out = out[: draw(st.integers(0, len(out) - 1))]
    return bytes(out)


def test_sadc_reader(tmp_path_factory: pytest.TempPathFactory) -> None:
    from pipeline.formats.sysstat.decode import parse_sadf_csv
    from pipeline.formats.sysstat.sadc import convert_sadc

    path = tmp_path_factory.mktemp("sadc") / "sa_fuzz"

    @BINARY
    @given(damaged_binary(SADC))
    def check(data: bytes) -> None:
        path.write_bytes(data)
        try:
            csv = convert_sadc(path)
        except ParseError as err:  # the file is quarantined whole
            assert (err.path, err.line_no) == (str(path), 0)
            assert "sadf" in err.reason  # its message, or why it cannot read the file
            return
        lines = csv.splitlines()
        _good, bad = consume(parse_sadf_csv(lines, str(path)))
        named(bad, str(path), len(lines))

    check()


def test_darshan_binary_reader(tmp_path_factory: pytest.TempPathFactory) -> None:
    # Through the worker pool the shipper uses: darshan-util is C, and a damaged log it does
    # not check may crash the process reading it; the pool turns that into a ParseError.
    import darshan

    from pipeline.formats.darshan.pool import DarshanPool

    wheel = Path(darshan.__file__).resolve().parent / "tests" / "input"
    logs = [
        wheel / "sample.darshan",  # format 3.10
        SHARED / "darshan-logs" / "release_logs" / "mpi-io-test-x86_64-3.5.0.darshan",  # 3.41
        SHARED / "darshan-logs" / "release_logs" / "mpi-io-test-ppc64-3.1.8.darshan",  # swapped
    ]
    originals = [p.read_bytes() for p in logs]
    tmp = tmp_path_factory.mktemp("darshan")
    pool = DarshanPool(2)
    n = [0]

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.sampled_from(range(len(logs))).flatmap(lambda i: damaged_binary(originals[i])))
    def check(data: bytes) -> None:
        n[0] += 1
        path = tmp / f"log{n[0]}.darshan"
        path.write_bytes(data)
        try:
            analysis = pool.result(str(path))
        except ParseError as err:  # quarantined whole
            assert (err.path, err.line_no) == (str(path), 0) and err.reason
            return
        assert analysis.log.path == str(path) and analysis.log.nprocs >= 0

    try:
        check()
    finally:
        pool.close()


SETTING_KEYS = [
    "elasticsearch",
    "embedded",
    "state_dir",
    "drops",
    "shipper",
    "fio",
    "peer",
    "darshan",
    "sink",
    "alerts",
    "url",
    "type",
    "path",
    "interval_ms",
    "percentiles",
    "schema",
    "namespace",
]
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(SETTING_KEYS) | st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=16,
)


@FUZZ
@given(st.dictionaries(st.sampled_from(SETTING_KEYS) | st.text(max_size=6), VALUES, max_size=5))
def test_settings_from_random_mappings(data: dict[str, Any]) -> None:
    from pipeline.settings import settings_from_mapping

    try:
        settings_from_mapping(data, env={}, source="c.yaml")
    except ConfigError as err:
        assert str(err).startswith("c.yaml: ")


def test_settings_and_schemas_from_random_yaml_files(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    import yaml

    from pipeline.records.event_schema import load_event_schema
    from pipeline.settings import load_settings

    path = tmp_path_factory.mktemp("yaml") / "c.yaml"
    documents = (
        VALUES.map(lambda v: yaml.safe_dump(v).encode())
        | st.text(max_size=300).map(str.encode)
        | st.binary(max_size=300)
        | st.sampled_from([b"[" * 3000, b"{a: " * 3000, b"!!python/object/apply:os.getcwd []"])
    )

    @FUZZ
    @given(documents)
    def check(data: bytes) -> None:
        path.write_bytes(data)
        try:
            load_settings(path, env={})
        except ConfigError as err:
            assert str(err).startswith(f"{path}: ")
        try:
            load_event_schema(path)
        except ConfigError as err:
            assert str(err).startswith(f"event schema {path}: ")

    check()
