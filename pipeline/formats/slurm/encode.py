"""Slurm job records -> ``logs-slurm.job-<namespace>`` documents: one per sacct row (a job or
one of its steps), fields under ``slurm.job.*`` plus ECS ``user.name``; ``event.kind`` is
``event`` (reference/elastic.md 1.2). The id is a hash of what identifies the row, so reading
the same export again is a 409 (``create``), never a second copy.
"""

from __future__ import annotations

from pipeline.formats.slurm.decode import SlurmJob
from pipeline.ids import doc_id
from pipeline.records.core import Document, LineRef
from pipeline.records.sources import SlurmJobSlurmJob, SlurmJobSource
from pipeline.sink.documents import DocContext, iso_ms, stream_name

SLURM_JOB_DATASET = "slurm.job"


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
    source: SlurmJobSource = {
        **ctx.base("logs", SLURM_JOB_DATASET, when, created_ms),
        **({} if job.user is None else {"user": {"name": job.user}}),
        "slurm": {"job": _slurm_fields(job)},
    }
    source["event"]["kind"] = "event"
    start_key = f"{job.start_s:.3f}" if job.start_s is not None else None
    ident = doc_id(SLURM_JOB_DATASET, job.id, start_key)
    return Document(stream_name("logs", SLURM_JOB_DATASET, ctx.namespace), ident, source, refs)


def _slurm_fields(job: SlurmJob) -> SlurmJobSlurmJob:
    """``slurm.job.*`` of one row, the values sacct left empty omitted."""
    return {
        "id": job.id,
        "job_id": job.job_id,
        "display_id": job.display_id,
        **({} if job.step is None else {"step": job.step}),
        **({} if job.user is None else {"user": job.user}),
        **({} if job.name is None else {"name": job.name}),
        **({} if job.partition is None else {"partition": job.partition}),
        **({} if job.account is None else {"account": job.account}),
        **({} if job.start_s is None else {"start": iso_ms(job.start_s * 1000)}),
        **({} if job.end_s is None else {"end": iso_ms(job.end_s * 1000)}),
        **({} if job.elapsed_s is None else {"elapsed_s": job.elapsed_s}),
        **({} if job.state is None else {"state": job.state}),
        **({} if job.exit_code is None else {"exit_code": job.exit_code}),
        **({} if job.node_count is None else {"node_count": job.node_count}),
        **({} if job.tasks is None else {"tasks": job.tasks}),
        **({} if job.cpus is None else {"cpus": job.cpus}),
        **({"nodes": list(job.nodes)} if job.nodes else {}),
    }
