"""Slurm job records -> ``logs-slurm.job-<namespace>`` documents: one per sacct row (a job or
one of its steps), fields under ``slurm.job.*`` plus ECS ``user.name``; ``event.kind`` is
``event`` (reference/elastic.md 1.2). The id is a hash of what identifies the row, so reading
the same export again is a 409 (``create``), never a second copy.
"""

from __future__ import annotations

from pipeline.formats.slurm.decode import SlurmJob
from pipeline.ids import doc_id
from pipeline.records.core import Document, LineRef
from pipeline.records.json import SourceFields
from pipeline.sink.documents import DocContext, iso_ms, stream_name

SLURM_JOB_DATASET = "slurm.job"


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


def _slurm_fields(job: SlurmJob) -> SourceFields:
    """``slurm.job.*`` of one row, the values sacct left empty omitted."""
    fields: dict[str, str | float | int | list[str] | None] = {
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
