"""Text reports of extracted requests and workload models for ``iolens requests``: one block
per request row (:mod:`pipeline.report.request_rows`), the model's clusters, the stitcher's
clocks and unattached fragments, and the models as indexed by the ``events`` drops.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, TextIO

from pipeline.records.json import JsonObject
from pipeline.reducers.stitch import Stitched
from pipeline.report.request_rows import ClockOffsetRow, EndpointRow, endpoint_dict, offset_dict

if TYPE_CHECKING:  # the module queries Elasticsearch: its client is not loaded for printing
    from pipeline.report.workload import ClusterRow, IndexedModel


def print_requests(out: TextIO, rows: Iterable[JsonObject]) -> None:
    """One block per request row (:func:`~pipeline.report.request_rows.request_dict`, with the
    stitched and clustered fields when present)."""
    for row in rows:
        flag = ""
        if "cluster" in row:
            flag = f"  cluster {row['cluster']}{' OUTLIER' if row['outlier'] else ''}"
        where = f" on {'+'.join(row['machines'])}" if "machines" in row else ""
        attrs = " ".join(f"{k}={','.join(map(str, v))}" for k, v in row["attributes"].items())
        out.write(
            f"request {row['request']}: {row['duration_ms']:.2f} ms, critical path "
            f"{row['critical_path_ms']:.2f} ms, {len(row['events'])} events{where}"
            f"{'' if row['complete'] else ' (incomplete)'}{flag}\n"
            f"  {attrs}\n  {row['canonical']}\n"
        )
        for machine, c in row.get("clock_offsets", {}).items():
            out.write(f"  clock of {machine} minus clock of {row['machine']}: {offset_text(c)}\n")
        if row.get("unmatched"):
            ends = ", ".join(endpoint_text(e) for e in row["unmatched"])
            out.write(f"  unmatched: {ends}\n")


def offset_text(c: ClockOffsetRow) -> str:
    """A clock offset row (:func:`~pipeline.report.request_rows.offset_dict`) in ms."""

    def ms(v: int | None) -> str:
        return "?" if v is None else f"{v / 1e6:+.3f}"

    return (
        f"{ms(c['offset_ns'])} ms (bounds {ms(c['lower_ns'])} .. {ms(c['upper_ns'])} ms, "
        f"{c['messages']} messages{'' if c['consistent'] else ', CROSSED'})"
    )


def endpoint_text(e: EndpointRow) -> str:
    """An endpoint row: ``event attribute=value on machine``."""
    return f"{e['event']} {e['attribute']}={e['value']} on {e['machine']}"


def print_model(out: TextIO, model: JsonObject) -> None:
    """The workload model row (:func:`~pipeline.report.request_rows.model_dict`)."""
    out.write(f"workload model (threshold {model['threshold']:g}):\n")
    for cl in model["clusters"]:
        sep = cl["separation"]
        out.write(
            f"  cluster {cl['cluster']}: {cl['size']} requests ({cl['share']:.1%}), diameter "
            f"{cl['diameter']:.3f}, separation {'-' if sep is None else f'{sep:.3f}'}\n"
            f"    {cl['representative']}\n"
        )
    errs = ", ".join(
        f"{k} {'-' if v is None else f'{v:.2%}'}" for k, v in model["model_error"].items()
    )
    out.write(f"  model error: {errs}\n")


def stitch_summary(result: Stitched) -> str:
    """The clocks, unattached fragments and per-machine counts of a stitching, one line each,
    then the totals."""
    lines = [
        f"clock of {b} minus clock of {a}: {offset_text(offset_dict(c))}"
        for (a, b), c in result.clocks.items()
    ]
    for u in result.unattached:
        f = u.fragment
        ends = ", ".join(endpoint_text(endpoint_dict(e)) for e in f.endpoints)
        lines.append(
            f"unattached fragment of {f.machine} ({u.reason}): {len(f.request.events)} events "
            f"from ts {f.request.start_ns}; {ends}"
        )
    for m, st in result.stats.items():
        lines.append(
            f"{m}: {st.events} events, {st.requests} requests, {st.fragments} unseeded "
            f"fragments kept, {st.dropped_groups} unseeded groups ({st.dropped_events} events) "
            f"dropped, {st.unknown} events of types the schema does not declare"
        )
    reqs = result.requests
    lines.append(
        f"{len(reqs)} requests ({sum(not s.request.complete for s in reqs)} incomplete) on "
        f"{len(result.stats)} machines, {sum(len(s.machines) > 1 for s in reqs)} of them "
        f"stitched across machines; {len(result.unattached)} fragments unattached"
    )
    return "".join(line + "\n" for line in lines)


def print_indexed_models(out: TextIO, models: list[IndexedModel], name: str | None) -> None:
    """The workload models as indexed (:func:`~pipeline.report.workload.indexed_models`), per
    cluster its counts, mean times, diameter and separation; ``name`` is the model asked for
    (None: all)."""
    if not models:
        which = f"model {name!r}" if name else "workload model"
        out.write(f"no {which} indexed yet (events drops index them)\n")
    for wm in models:
        snap = wm["snapshot"]
        when = f", snapshot {snap['@timestamp']} on {snap['host']}" if snap else ""
        out.write(
            f"model {wm['model']}: {wm['requests']} requests, {wm['outliers']} outliers, "
            f"{len(wm['clusters'])} clusters{when}\n"
        )
        for cl in wm["clusters"]:
            out.write(_indexed_cluster_text(cl))
        if snap and snap["model_error"]:
            errs = ", ".join(f"{k} {v:.2%}" for k, v in sorted(snap["model_error"].items()))
            out.write(f"  model error: {errs}\n")


def _indexed_cluster_text(cl: ClusterRow) -> str:
    sep = cl.get("separation")
    return (
        f"  cluster {cl['cluster']}: {cl['requests']} requests ({cl['share']:.1%}), "
        f"{cl['outliers']} outliers, {cl['incomplete']} incomplete, mean "
        f"{_ms(cl.get('mean_duration_ms'))} (critical path "
        f"{_ms(cl.get('mean_critical_path_ms'))}), diameter "
        f"{_num(cl.get('diameter'))}, separation {_num(sep)}\n"
        f"    {cl.get('representative') or '(not in the latest snapshot yet)'}\n"
    )


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f} ms"


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"
