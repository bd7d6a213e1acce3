"""Documents of the HPC context sources: Slurm job records and Lustre (LMT) OST load.

Streams (reference/elastic.md 1.2; DESIGN.md "Documents and data streams"):

* ``logs-slurm.job-<namespace>``: one document per sacct row (a job or one of its steps),
  fields under ``slurm.job.*`` plus ECS ``user.name``; ``event.kind`` is ``event``.
* ``metrics-lmt.ost-<namespace>``: one document per OST x LMT interval, fields under
  ``lmt.ost.*`` plus ``metricset.period`` (ms).

Ids are hashes of what identifies the record, so reading the same input again is a 409
(``create``), never a second copy.
"""

from __future__ import annotations

from typing import Any

from pipeline.ids import doc_id
from pipeline.parsers.slurm import SlurmJob
from pipeline.records import Document, LineRef
from pipeline.reducers.lmt import OstInterval
from pipeline.sink.documents import DocContext, iso_ms, stream_name

SLURM_JOB_DATASET = "slurm.job"
LMT_OST_DATASET = "lmt.ost"


def _iso_s(epoch_s: float | None) -> str | None:
    return None if epoch_s is None else iso_ms(epoch_s * 1000)


def slurm_job_document(
    ctx: DocContext, job: SlurmJob, refs: tuple[LineRef, ...], created_ms: float
) -> Document:
    """One ``logs-slurm.job`` document per sacct row (job or step).

    ``@timestamp`` is the start, else the end, else ``created_ms`` (a pending job).
    ``slurm.job``: ``id``, ``job_id``, ``display_id``, ``step``, ``user``, ``name``,
    ``partition``, ``account``, ``start``/``end`` (ISO dates, ms), ``elapsed_s``, ``state``,
    ``exit_code``, ``node_count``, ``tasks``, ``cpus``, ``nodes`` (the expanded host names);
    values sacct left empty are omitted. ECS ``user.name`` repeats the user.

    The id is the dataset, the job/step id (``JobIDRaw``) and its start: the same row read
    again is a 409. A record first read while the job was pending (no start) or running (no
    end) keeps its id when read again later with more filled in, so that later read is a 409
    too: ship finished jobs (``sacct --state=...`` or an ``--endtime`` in the past).

    Args:
        ctx: the instance's shared document fields.
        job: the parsed row.
        refs: the input lines it comes from (acknowledged once the document is).
        created_ms: when the document is built, epoch ms (``event.created``).
    """
    start_ms = job.start_s * 1000 if job.start_s is not None else None
    end_ms = job.end_s * 1000 if job.end_s is not None else None
    when = start_ms if start_ms is not None else end_ms if end_ms is not None else created_ms
    source = ctx.base("logs", SLURM_JOB_DATASET, when, created_ms)
    source["event"]["kind"] = "event"
    if job.user is not None:
        source["user"] = {"name": job.user}
    source["slurm"] = {"job": _slurm_fields(job)}
    start_key = f"{job.start_s:.3f}" if job.start_s is not None else None
    ident = doc_id(SLURM_JOB_DATASET, job.id, start_key)
    return Document(stream_name("logs", SLURM_JOB_DATASET, ctx.namespace), ident, source, refs)


def _slurm_fields(job: SlurmJob) -> dict[str, Any]:
    """``slurm.job.*`` of one row, the values sacct left empty omitted."""
    fields: dict[str, Any] = {
        "id": job.id,
        "job_id": job.job_id,
        "display_id": job.display_id,
        "step": job.step,
        "user": job.user,
        "name": job.name,
        "partition": job.partition,
        "account": job.account,
        "start": _iso_s(job.start_s),
        "end": _iso_s(job.end_s),
        "elapsed_s": job.elapsed_s,
        "state": job.state,
        "exit_code": job.exit_code,
        "node_count": job.node_count,
        "tasks": job.tasks,
        "cpus": job.cpus,
        "nodes": list(job.nodes) if job.nodes else None,
    }
    return {k: v for k, v in fields.items() if v is not None}


def lmt_ost_document(
    ctx: DocContext, iv: OstInterval, refs: tuple[LineRef, ...], created_ms: float
) -> Document:
    """One ``metrics-lmt.ost`` document per OST x interval.

    ``@timestamp`` is the interval start (the interval is ``[start, start + interval_s)``);
    ``metricset.period`` its length in ms. ``lmt.ost``: ``name``, ``fs``, ``index`` (the
    Lustre OST index), ``read_bytes``, ``write_bytes``, ``read_bytes_per_s``,
    ``write_bytes_per_s``, ``interval_s``, ``reset``, ``gap`` and ``pct_cpu`` (omitted when not
    exported). The id is the dataset, the OST name and the interval start.

    Args:
        ctx: the instance's shared document fields.
        iv: the interval.
        refs: the input lines of the samples it derives from.
        created_ms: when the document is built, epoch ms (``event.created``).
    """
    source = ctx.base("metrics", LMT_OST_DATASET, iv.start_s * 1000, created_ms)
    source["metricset"] = {"period": round(iv.interval_s * 1000)}
    source["lmt"] = {"ost": _ost_fields(iv)}
    ident = doc_id(LMT_OST_DATASET, iv.ost_name, f"{iv.start_s:.3f}")
    return Document(stream_name("metrics", LMT_OST_DATASET, ctx.namespace), ident, source, refs)


def _ost_fields(iv: OstInterval) -> dict[str, Any]:
    """``lmt.ost.*`` of one interval (``pct_cpu`` only when exported)."""
    ost: dict[str, Any] = {
        "name": iv.ost_name,
        "fs": iv.fs,
        "index": iv.ost_index,
        "read_bytes": iv.read_bytes,
        "write_bytes": iv.write_bytes,
        "read_bytes_per_s": iv.read_bytes_per_s,
        "write_bytes_per_s": iv.write_bytes_per_s,
        "interval_s": iv.interval_s,
        "reset": iv.reset,
        "gap": iv.gap,
    }
    if iv.pct_cpu is not None:
        ost["pct_cpu"] = iv.pct_cpu
    return ost
