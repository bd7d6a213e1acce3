"""IOMiner's tuples and their composable operators, over a pandas DataFrame.

Seed 004, section II-A: IOMiner offers ``sort``, ``group``, ``filter``, ``project`` and
``join`` (as in SQL), plus ``percentile`` and ``bin``, with user-defined functions (UDFs), and
the output of one operator is the input of the next. A :class:`Tuples` wraps one DataFrame;
every operator returns a new :class:`Tuples` and leaves its input alone.

Column names may be written as users read them: ``"bytes written"`` means ``bytes_written``
(see :func:`pipeline.query.expr.normalize`). An unknown column raises
:class:`~pipeline.query.expr.ColumnError` (a ``KeyError``) listing the columns there are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd  # type: ignore[import-untyped]

from pipeline.query.expr import compile_filter
from pipeline.query.perf import perf_factors
from pipeline.query.quantity import normalize, parse_quantity, resolve
from pipeline.query.tables import TABLES, Row

JOIN_HOWS = ("inner", "left", "right", "outer")

DEFAULT_Q: tuple[float, ...] = tuple(i / 100 for i in range(101))
"""Default quantiles of :meth:`Tuples.percentile`: 0, 0.01, ..., 1 (IOMiner's percentile
list, as quantiles in [0, 1])."""


def _names(args: Sequence[str | Sequence[str]]) -> list[str]:
    out: list[str] = []
    for a in args:
        if isinstance(a, str):
            out.append(a)
        else:
            out.extend(a)
    return out


def _as_list(value: str | Sequence[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _udf_name(udf: Callable[..., Any]) -> str:
    name = getattr(udf, "__name__", "")
    return name if name.isidentifier() else "value"


def _is_text(s: pd.Series) -> bool:
    return bool(pd.api.types.is_string_dtype(s.dtype) or s.dtype == object)


class Tuples:
    """A table of rows (tuples), immutable in style: operators return new Tuples.

    Args:
        df: the rows; its index is dropped (rows are numbered 0..n-1).
        table: the table the rows come from (``darshan_job``, ``darshan_file``, ``slurm``,
            ``lmt``, ``io_diagnosis``) or None; it names clashing columns in :meth:`join`.

    ``len(t)`` is the row count; iterating gives each row as a dict of column -> value.
    """

    __slots__ = ("_df", "_table")

    def __init__(self, df: pd.DataFrame, table: str | None = None) -> None:
        self._df = df.reset_index(drop=True)
        self._table = table

    @property
    def df(self) -> pd.DataFrame:
        """The rows (shared, not copied: treat it as read-only, or use :meth:`to_pandas`)."""
        return self._df

    def to_pandas(self) -> pd.DataFrame:
        """A copy of the rows as a DataFrame."""
        return self._df.copy()

    @property
    def table(self) -> str | None:
        """The source table's name, or None."""
        return self._table

    @property
    def columns(self) -> tuple[str, ...]:
        """Column names in order."""
        return tuple(str(c) for c in self._df.columns)

    def __len__(self) -> int:
        return len(self._df)

    def __iter__(self) -> Iterator[Row]:
        for row in self._df.to_dict(orient="records"):
            yield {str(k): v for k, v in row.items()}

    def __repr__(self) -> str:
        cols = ", ".join(self.columns[:8]) + (", ..." if len(self.columns) > 8 else "")
        return f"Tuples(table={self._table!r}, rows={len(self)}, columns=[{cols}])"

    def _new(self, df: pd.DataFrame) -> Tuples:
        return Tuples(df, self._table)

    def _col(self, name: str, context: str = "") -> str:
        return resolve(name, self.columns, context)

    def project(self, *columns: str | Sequence[str]) -> Tuples:
        """Only these columns, in this order (SQL ``SELECT``; Algorithm 1 lines 14, 21).

        Args:
            columns: names (``"job id"``) or lists of names.

        Raises:
            ColumnError: an unknown column.
            ValueError: no column given.
        """
        names = _names(columns)
        if not names:
            raise ValueError("project needs at least one column")
        cols = list(dict.fromkeys(self._col(n, "project") for n in names))
        return self._new(self._df[cols])

    def filter(self, condition: str | Callable[[Row], Any]) -> Tuples:
        """The rows that satisfy ``condition`` (SQL ``WHERE``; Algorithm 1 lines 14, 23).

        Args:
            condition: a filter string, ``"bytes written < 1GB"`` (grammar, units and
                missing-value rule in :mod:`pipeline.query.expr`; evaluated vectorised), or a
                UDF called with each row as a dict, returning a truthy value to keep it.

        Raises:
            FilterSyntaxError: (a ``ValueError``) a filter string that cannot be parsed or
                applied (unknown column or unit, bad value), naming the offending token.
        """
        if isinstance(condition, str):
            mask = compile_filter(condition)(self._df)
        else:
            keep = [bool(condition(row)) for row in self]
            mask = pd.Series(keep, index=self._df.index, dtype=bool)
        return self._new(self._df[mask])

    def sort(self, by: str | Sequence[str], ascending: bool | Sequence[bool] = True) -> Tuples:
        """Rows ordered by ``by`` (SQL ``ORDER BY``, seed 004 §II-A), stable: ties keep their
        order; missing values come last.

        Args:
            by: column(s), the first most significant.
            ascending: one flag for all columns or one per column.

        Raises:
            ColumnError: an unknown column.
        """
        cols = [self._col(c, "sort") for c in _as_list(by)]
        asc = ascending if isinstance(ascending, bool) else list(ascending)
        return self._new(
            self._df.sort_values(cols, ascending=asc, kind="stable", na_position="last")
        )

    def bin(self, name: str, udf: Callable[[Any], Any], column: str) -> Tuples:
        """Tag every row with ``udf(row[column])`` in a new column ``name``.

        Seed 004 Algorithm 1 line 15: ``bin("workload", classify_workload, "bytes written")``
        labels jobs by write size. The UDF gets each value as stored (NaN/None for missing).

        Raises:
            ColumnError: ``column`` is unknown.
            ValueError: ``name`` is already a column.
        """
        col = self._col(column, "bin")
        new = normalize(name)
        if new in self.columns:
            raise ValueError(f"bin column {new!r} exists already; project it away first")
        df = self._df.copy()
        df[new] = [udf(v) for v in df[col].tolist()]
        return self._new(df)

    def group(
        self,
        by: str | Sequence[str],
        udf: Callable[[pd.DataFrame], Any],
        name: str | None = None,
    ) -> Tuples:
        """One row per group of equal ``by`` values, computed by a UDF from the group's rows.

        Seed 004 Algorithm 1 line 17: ``group("job id", calculate_ost_count)``.

        Args:
            by: grouping column(s). Rows whose key is missing are left out.
            udf: gets each group's rows as a DataFrame (key columns included, index 0..n-1)
                and returns a scalar, or a dict / Series of named values.
            name: column of a scalar result; default the UDF's ``__name__`` (``value`` for a
                lambda).

        Returns:
            Key columns then value columns (normalised names), one row per group, in key
            order; no rows for no input.

        Raises:
            ColumnError: an unknown ``by`` column.
            ValueError: a result name equal to a key column.
        """
        keys = [self._col(c, "group") for c in _as_list(by)]
        value_name = normalize(name) if name is not None else _udf_name(udf)
        rows = [
            _group_row(keys, key, part, udf, value_name)
            for key, part in self._df.groupby(keys, sort=True, dropna=True)
        ]
        if not rows:
            return Tuples(pd.DataFrame(columns=[*keys, value_name]), None)
        return Tuples(pd.DataFrame(rows), None)

    def join(
        self,
        other: Tuples,
        on: str | Sequence[str],
        how: str = "inner",
        suffixes: tuple[str, str] | None = None,
    ) -> Tuples:
        """Rows of both sides with equal ``on`` values (SQL ``JOIN``; Algorithm 1 lines 21, 23).

        Args:
            other: the right side.
            on: key column(s), present on both sides. Keys of different kinds (text on one
                side, numbers on the other) are compared as text.
            how: ``inner``, ``left``, ``right`` or ``outer``.
            suffixes: appended to the left and right names of non-key columns both sides
                have. Default: the left keeps its names, the right gets ``_`` + its table's
                alias (``_file`` for darshan_file, ``_job``, ``_slurm``, ``_lmt``,
                ``_diagnosis``; ``_right`` when unknown). So ``job.join(file, "job id")`` has
                ``bytes_written`` (the job's) and ``bytes_written_file`` (the file's).

        Returns:
            Tuples of the left's table; row order as pandas' ``merge``.

        Raises:
            ColumnError: a key missing on either side.
            ValueError: an unknown ``how``, or suffixes that leave names clashing.
        """
        if how not in JOIN_HOWS:
            raise ValueError(f"how must be one of {', '.join(JOIN_HOWS)}, not {how!r}")
        keys = [self._col(c, "join, left side") for c in _as_list(on)]
        for k in keys:
            other._col(k, "join, right side")
        if suffixes is None:
            suffixes = ("", f"_{_alias(other.table)}")
        merged = _merge(self._df, other._df, keys, how, suffixes)
        if merged.columns.duplicated().any():
            dup = sorted({str(c) for c in merged.columns[merged.columns.duplicated()]})
            raise ValueError(f"join: suffixes {suffixes} leave duplicate columns {dup}")
        return self._new(merged)

    def percentile(
        self,
        column: str,
        q: Sequence[float] | None = None,
        method: str = "linear",
    ) -> Tuples:
        """The distribution of a numeric column as a list of percentiles.

        Seed 004 Algorithm 1 line 19 ("sorts selected tuples by bytes written and returns a
        percentile list"). Missing values are left out.

        Args:
            column: a numeric (or boolean) column.
            q: quantiles in [0, 1]; default :data:`DEFAULT_Q` (0, 0.01, ..., 1: 101 values).
            method: numpy's quantile method; ``linear`` (default) interpolates between the
                two nearest order statistics (Hyndman & Fan type 7), so q=0 is the minimum
                and q=1 the maximum.

        Returns:
            Tuples with columns ``q`` and the column, one row per quantile; the values are
            NaN when the column has no values.

        Raises:
            ColumnError: an unknown column.
            ValueError: a quantile outside [0, 1], or a column that is not numeric.
        """
        col = self._col(column, "percentile")
        qs = _levels(q)
        result = _quantiles(self._df[col], col, qs, method)
        return self._new(pd.DataFrame({"q": qs, col: result}))

    def extract_perf_factors(
        self, low: str | float, high: str | float, direction: str = "write"
    ) -> Tuples:
        """Jobs whose bandwidth lies in ``[low, high)`` and the factors of their slow I/O.

        Seed 004 section II-D, Algorithm 1 line 25: on job x file tuples (or file tuples),
        per job: critical path, critical files and exclusive times by the sweep line, the
        bandwidth over the critical path, and the contributing factors. See
        :func:`pipeline.query.perf.perf_factors` for the definitions and result columns.

        Args:
            low: lowest bandwidth, bytes/s: a number or a quantity (``"0"``, ``"500MB"``).
            high: bandwidth bound (exclusive), bytes/s: ``"1GB"`` means 1 GB/s.
            direction: ``read``, ``write`` or ``both``.

        Raises:
            ColumnError: a file column the analysis needs is missing.
            ValueError: a bad direction or bound.
        """
        lo = parse_quantity(low) if isinstance(low, str) else float(low)
        hi = parse_quantity(high) if isinstance(high, str) else float(high)
        return Tuples(perf_factors(self._df, lo, hi, direction), None)


def _alias(table: str | None) -> str:
    if table is not None and table in TABLES:
        return TABLES[table].alias
    return "right"


def _as_text(s: pd.Series) -> pd.Series:
    return s.map(lambda v: v if v is None or (isinstance(v, float) and np.isnan(v)) else str(v))


def _group_row(
    keys: list[str], key: Any, part: pd.DataFrame, udf: Callable[[pd.DataFrame], Any], name: str
) -> Row:
    """The row of one group: its key values, then what ``udf`` made of its rows (a scalar
    named ``name``, or a dict / Series of named values).

    Raises:
        ValueError: a result name equal to a key column.
    """
    key_values = key if isinstance(key, tuple) else (key,)
    out = udf(part.reset_index(drop=True))
    if isinstance(out, pd.Series):
        out = out.to_dict()
    values = (
        {normalize(str(k)): v for k, v in out.items()} if isinstance(out, Mapping) else {name: out}
    )
    clash = set(values) & set(keys)
    if clash:
        raise ValueError(f"group result {sorted(clash)} would overwrite key columns")
    return dict(zip(keys, key_values, strict=True)) | values


def _merge(
    left: pd.DataFrame,
    right: pd.DataFrame,
    keys: list[str],
    how: str,
    suffixes: tuple[str, str],
) -> pd.DataFrame:
    """``left`` and ``right`` merged on ``keys``, a key compared as text when one side holds
    text and the other not.

    Raises:
        ValueError: pandas refused the merge.
    """
    for k in keys:
        if _is_text(left[k]) != _is_text(right[k]):
            left = left.assign(**{k: _as_text(left[k])})
            right = right.assign(**{k: _as_text(right[k])})
    try:
        return left.merge(right, on=keys, how=how, suffixes=suffixes)
    except pd.errors.MergeError as err:
        raise ValueError(f"join: {err}") from None


def _levels(q: Sequence[float] | None) -> np.ndarray:
    """The quantile levels asked for (default :data:`DEFAULT_Q`) as an array.

    Raises:
        ValueError: none, or one outside [0, 1].
    """
    qs = np.asarray(DEFAULT_Q if q is None else list(q), dtype=np.float64)
    if qs.ndim != 1 or qs.size == 0 or not np.all((qs >= 0) & (qs <= 1)):
        raise ValueError(f"quantiles must be a non-empty list within [0, 1], not {q!r}")
    return qs


def _quantiles(column: pd.Series, col: str, qs: np.ndarray, method: str) -> np.ndarray:
    """The ``qs`` quantiles of the column's values (missing ones left out); NaN for no values.

    Raises:
        ValueError: the column is not numeric.
    """
    try:
        values = pd.to_numeric(column.dropna(), errors="raise").to_numpy(np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"percentile: column {col!r} is not numeric") from None
    if values.size == 0:
        return np.full(qs.shape, np.nan)
    return np.quantile(values, qs, method=method)  # type: ignore[call-overload,no-any-return]
