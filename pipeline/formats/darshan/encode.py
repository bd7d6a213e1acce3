"""Documents of Darshan jobs: IOMiner's job and file tables, and the I/O diagnosis.

Seed 004 II-B: one ``logs-darshan.job`` document per log (the Darshan job table), one
``logs-darshan.file`` document per job x file (the file table, with each file's stripe size,
stripe count and OST list: IOMiner's OST bitmap as an array of indices, which Elasticsearch
aggregates and intersects directly) and one ``logs-iolens.io_diagnosis`` document per job
(critical files, exclusive times, factors, insights, causes). Every document carries
``darshan.job.id`` and ``darshan.log.id``, the join keys (Slurm's ``slurm.job.job_id`` is the
same job id). Ids derive from the log identity (job id, start, log name; a file's id adds its
module's initial and its record id), so reading a log again is a 409.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any, cast

from pipeline.ids import doc_id
from pipeline.records.core import Document, LineRef
from pipeline.records.darshan_rows import DarshanFileRow
from pipeline.records.json import Source, SourceFields
from pipeline.records.sources import (
    CommonSource,
    DarshanFileDarshan,
    DarshanJobDarshanJob,
    DarshanJobDarshanLog,
    DarshanJobSource,
    IolensIoDiagnosisIolensIoDiagnosis,
    IolensIoDiagnosisIolensIoDiagnosisCauses,
    IolensIoDiagnosisIolensIoDiagnosisCriticalFiles,
    IolensIoDiagnosisIolensIoDiagnosisFactors,
    IolensIoDiagnosisIolensIoDiagnosisInsights,
    IolensIoDiagnosisSource,
)
from pipeline.reducers.darshan.critical import CriticalFile
from pipeline.reducers.darshan_job import JobAnalysis
from pipeline.reducers.insights import Insight
from pipeline.reducers.io_diagnosis import Cause, Diagnosis
from pipeline.sink.documents import DocContext, iso_ms, stream_name
from pipeline.sink.spool import encode_json

JOB_DATASET = "darshan.job"
FILE_DATASET = "darshan.file"
DIAGNOSIS_DATASET = "iolens.io_diagnosis"


def _base(ctx: DocContext, dataset: str, when_s: float, created_ms: float) -> CommonSource:
    source = ctx.base("logs", dataset, when_s * 1000, created_ms)
    source["event"]["kind"] = "event"
    return source


def _log_fields(a: JobAnalysis) -> DarshanJobDarshanLog:
    log = a.log
    return {
        "id": a.log_id,
        "name": os.path.basename(log.path),
        "version": log.version,
        **({"lib_version": log.lib_ver} if log.lib_ver else {}),
        "modules": sorted(log.modules),
        "partial_modules": list(log.partial),
        "records": log.records,
    }


def _job_fields(a: JobAnalysis) -> DarshanJobDarshanJob:
    """``darshan.job.*``: the job row without its None values, ``start_s``/``end_s`` as the
    dates ``start``/``end``.

    The row's keys are the mapping's (``tests/records/test_darshan_rows.py`` checks them), but
    a comprehension over them is not typed, hence the cast.
    """
    row = {k: v for k, v in a.job.items() if v is not None and k not in ("start_s", "end_s")}
    job = cast(DarshanJobDarshanJob, row)
    job["start"] = iso_ms(a.job["start_s"] * 1000)
    job["end"] = iso_ms(a.job["end_s"] * 1000)
    return job


def job_document(
    ctx: DocContext, a: JobAnalysis, refs: tuple[LineRef, ...], created_ms: float
) -> Document:
    """The ``logs-darshan.job`` document of one log; ``@timestamp`` is the job start.

    Fields: ``darshan.job.*`` as :func:`~pipeline.reducers.darshan_job.analyze` names them
    (``start``/``end`` as dates instead of ``start_s``/``end_s``), ``darshan.log.*``, and ECS
    ``user.id`` / ``user.name`` and ``log.file.path``.
    """
    user = a.job["user"]
    source: DarshanJobSource = {
        **_base(ctx, JOB_DATASET, a.job["start_s"], created_ms),
        "darshan": {"job": _job_fields(a), "log": _log_fields(a)},
        "user": {"id": str(a.log.uid), **({} if user is None else {"name": user})},
        "log": {"file": {"path": a.log.path}},
    }
    ident = doc_id(JOB_DATASET, a.log_id)
    return Document(stream_name("logs", JOB_DATASET, ctx.namespace), ident, source, refs)


def file_documents(
    ctx: DocContext, a: JobAnalysis, refs: tuple[LineRef, ...], created_ms: float
) -> Iterator[Document]:
    """One ``logs-darshan.file`` document per file of the job; ``@timestamp`` is the job start,
    like the job's document, so a time range selects a job with all of its files (the file's
    own activity is ``darshan.file.start_s``/``end_s`` from there)."""
    index = stream_name("logs", FILE_DATASET, ctx.namespace)
    # The ECS part and the join keys are the same for every file of the log: built once and
    # shared (documents are never modified once built).
    base = _base(ctx, FILE_DATASET, a.log.start_s, created_ms)
    keys: DarshanFileDarshan = {"job": {"id": a.log.jobid}, "log": {"id": a.log_id}}
    # the log's hashed identity, then the file's module and record id: unique within the log
    prefix = doc_id(FILE_DATASET, a.log_id) + "."
    ids = [prefix + r["module"][0] + r["record_id"] for r in a.files]
    # encoded together: the shared part once, then each file's own object
    head = encode_json(base)[:-1] + b',"darshan":' + encode_json(keys)[:-1] + b',"file":'
    for row, ident in zip(a.files, ids, strict=True):
        source = FileSource(base, keys, row)
        yield Document(index, ident, source, refs, head + encode_json(row) + b"}}")


class FileSource(Source):
    """The source of a ``logs-darshan.file`` document, built only when read.

    The bulk sink sends the document's encoded bytes, so the merged mapping (the ECS part
    shared by all files of a log, the join keys and the file's row) is only put together for
    the spool, the dead-letter area or a test that looks at it.
    """

    __slots__ = ("_base", "_keys", "_merged", "_row")

    def __init__(self, base: CommonSource, keys: DarshanFileDarshan, row: DarshanFileRow):
        self._base, self._keys, self._row = base, keys, row
        self._merged: SourceFields | None = None

    def _dict(self) -> SourceFields:
        if self._merged is None:
            self._merged = {**self._base, "darshan": {**self._keys, "file": self._row}}
        return self._merged

    def __getitem__(self, key: str) -> Any:
        return self._dict()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._dict())

    def __len__(self) -> int:
        return len(self._dict())


def diagnosis_document(
    ctx: DocContext, d: Diagnosis, refs: tuple[LineRef, ...], created_ms: float
) -> Document:
    """The ``logs-iolens.io_diagnosis`` document of one job; ``@timestamp`` is the job start."""
    a = d.analysis
    source: IolensIoDiagnosisSource = {
        **_base(ctx, DIAGNOSIS_DATASET, a.log.start_s, created_ms),
        "iolens": {"io_diagnosis": _diagnosis_fields(d)},
        "darshan": {"job": {"id": a.log.jobid}, "log": {"id": a.log_id}},
    }
    ident = doc_id(DIAGNOSIS_DATASET, a.log_id)
    return Document(stream_name("logs", DIAGNOSIS_DATASET, ctx.namespace), ident, source, refs)


def _diagnosis_fields(d: Diagnosis) -> IolensIoDiagnosisIolensIoDiagnosis:
    """``iolens.io_diagnosis.*``: the job, its bandwidths and times, its first 20 critical
    files, its factors, slow OSTs, insights and causes (values that are None left out)."""
    a = d.analysis
    job = a.job
    read, write = (d.bandwidth_bytes_per_s.get(k) for k in ("read", "write"))
    critical, naive = job["critical_bytes_per_s"], job["naive_bytes_per_s"]
    return {
        "job_id": a.log.jobid,
        "log_id": a.log_id,
        **({} if job["exe"] is None else {"exe": job["exe"]}),
        **({} if job["user"] is None else {"user": job["user"]}),
        "nprocs": job["nprocs"],
        "low_bandwidth": bool(d.low),
        "low_directions": list(d.low),
        "direction": a.direction,
        **({} if read is None else {"read_bytes_per_s": read}),
        **({} if write is None else {"write_bytes_per_s": write}),
        **({} if critical is None else {"critical_bytes_per_s": critical}),
        **({} if naive is None else {"naive_bytes_per_s": naive}),
        "end": iso_ms(a.log.end_s * 1000),
        "io_time_s": a.cover.union,
        "span_s": a.cover.span,
        "critical_files": [_critical_file_fields(cf, d.placement) for cf in a.critical[:20]],
        "critical_file_count": len(a.critical),
        "factors": _factors(a.factors),
        "slow_osts": [o.ost for o in a.osts if o.slow],
        "insights": [_insight_fields(i) for i in d.insights],
        "causes": [_cause_fields(c) for c in d.causes],
    }


def _factors(values: Mapping[str, float | None]) -> IolensIoDiagnosisIolensIoDiagnosisFactors:
    """The factors that are defined (not None).

    Their names are the analysis' (``FACTOR_NAMES`` of :mod:`pipeline.reducers.darshan.critical`
    and ``ost_count``), keys of a dict at run time, hence the cast;
    ``tests/sink/test_template_documents.py`` checks them against the mapping.
    """
    return cast(IolensIoDiagnosisIolensIoDiagnosisFactors, _defined(values))


def _defined(values: Mapping[str, float | None]) -> dict[str, float]:
    return {k: v for k, v in values.items() if v is not None}


def _critical_file_fields(
    cf: CriticalFile, placement: Mapping[str, tuple[str, str]]
) -> IolensIoDiagnosisIolensIoDiagnosisCriticalFiles:
    """One critical file: its share of the critical path, OSTs, mount point and LUN (where the
    mount table placed it) and its own factors (named at run time, as :func:`_factors`)."""
    fields: IolensIoDiagnosisIolensIoDiagnosisCriticalFiles = {
        "name": cf.name,
        "key": cf.key,
        "exclusive_s": cf.exclusive_s,
        "share": cf.share,
        "osts": list(cf.osts),
        "nprocs": cf.nprocs,
        "stripe_count": cf.stripe_count,
    }
    if cf.name in placement:
        fields["mount_point"], fields["lun"] = placement[cf.name]
    fields.update(cast(IolensIoDiagnosisIolensIoDiagnosisCriticalFiles, _defined(cf.factors)))
    return fields


def _insight_fields(i: Insight) -> IolensIoDiagnosisIolensIoDiagnosisInsights:
    return {
        "code": i.code,
        "level": i.level,
        "message": i.message,
        "files": list(i.files),
    }


def _cause_fields(c: Cause) -> IolensIoDiagnosisIolensIoDiagnosisCauses:
    return {
        "kind": c.kind,
        "message": c.message,
        **({} if c.ost is None else {"ost": c.ost}),
        "files": list(c.files),
        "source": c.source,
        **({} if c.lun is None else {"lun": c.lun}),
    }
