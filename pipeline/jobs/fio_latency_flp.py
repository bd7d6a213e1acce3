"""The latency job's ``fio.method: flp``: fiologparser_hist.py's time-weighting per scope.

The histogram documents around one interval (:func:`~pipeline.jobs.fio_latency_queries.
flp_window_query`) are turned back into the log rows the script would read, one stream per
(host, log prefix, job); each scope (the cluster, a host, a job) merges its streams by time,
ties by stream order, and runs them through
:func:`pipeline.reducers.fio_flp.weighted_interval` (seed 000 "Histogram Merging Algorithm").
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from pipeline.formats.fio.window import percentile_key
from pipeline.jobs.fio_hits import hist_row, job_scope, layout_of
from pipeline.records.core import FioHistRow
from pipeline.records.fio_bins import BinLayout
from pipeline.records.json import Response
from pipeline.reducers.fio_flp import FlpOptions, FlpStats, weighted_interval

Stream = tuple[str, str, str]
"""``(host, log prefix, job)`` of one histogram log."""

DIR_CODE_NAMES = {"m": "mixed", "r": "read", "w": "write", "t": "trim"}


def flp_streams(
    hits: Iterable[Response],
) -> tuple[dict[Stream, list[FioHistRow]], BinLayout | None]:
    """The rows of each stream in ``hits`` (window order) and their layout, None without hits.

    Documents with another layout than the first one are left out.
    """
    streams: dict[Stream, list[FioHistRow]] = defaultdict(list)
    layout: BinLayout | None = None
    for hit in hits:
        src = hit["_source"]
        fio = src["fio"]
        lay = layout_of(fio)
        layout = layout or lay
        if lay != layout:
            continue
        streams[(src["host"]["name"], fio.get("prefix") or "", str(fio["job"]))].append(
            hist_row(fio, lay)
        )
    return streams, layout


def flp_options(interval_ms: int, layout: BinLayout, percentiles: Sequence[float]) -> FlpOptions:
    """The script's options for the job's percentiles (50 is always computed) and directions."""
    pct = [p for p in percentiles if p != 50]
    return FlpOptions(
        interval_ms=interval_ms,
        percentiles=":".join(f"{p:g}" for p in pct),
        directions="rwtm",
        usbin=layout.unit == "us",
    )


def flp_scopes(streams: Iterable[Stream]) -> dict[tuple[str, str], list[Stream]]:
    """``(scope, value) -> streams``: the cluster (all), each host and each job."""
    scopes: dict[tuple[str, str], list[Stream]] = {("cluster", ""): sorted(streams)}
    for host, prefix, job in scopes[("cluster", "")]:
        scopes.setdefault(("host", host), []).append((host, prefix, job))
        scopes[("job", job_scope(host, prefix, job))] = [(host, prefix, job)]
    return scopes


def scope_stats(
    streams: Mapping[Stream, list[FioHistRow]],
    members: Sequence[Stream],
    layout: BinLayout,
    opts: FlpOptions,
    interval: tuple[int, int],
) -> tuple[int, list[FlpStats]]:
    """``(records merged, rows per direction)`` of one scope over ``interval`` (start, end ms)."""
    merged = sorted(
        ((r.time_ms, i, r) for i, m in enumerate(members) for r in streams[m]),
        key=lambda x: (x[0], x[1]),
    )
    start, end = interval
    return len(merged), weighted_interval((r for _, _, r in merged), layout, opts, start, end)


def flp_fields(st: FlpStats, opts: FlpOptions, scale: float) -> dict[str, float | int | None]:
    """The latency document's statistics of one row, ns (``scale``: ns per bin unit)."""
    stats: dict[str, float | int | None] = {
        "samples": st.samples,
        "min": st.min * scale,
        "mean": st.avg * scale,
        "max": st.max * scale,
    }
    for p, v in zip(opts.percs, st.pcts, strict=True):
        stats[percentile_key(p)] = v * scale
    return stats
