"""One typed, frozen configuration model, loaded from ``config/pipeline.yaml``.

The model is closed to unknown keys (a misspelt key is an error that names it). Environment
variables override the Elasticsearch connection: ``IOLENS_ES_URL``, ``IOLENS_ES_API_KEY``,
``IOLENS_ES_USERNAME``, ``IOLENS_ES_PASSWORD``, ``IOLENS_ES_CA_CERTS``. Nothing is loaded at import
time; the CLI calls :func:`load_settings`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from pipeline.errors import ConfigError

__all__ = ["ConfigError", "Settings", "load_settings", "settings_from_mapping"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ElasticsearchSettings(_Frozen):
    """How to reach the cluster."""

    url: str = Field("http://localhost:9200", description="Elasticsearch URL (IOLENS_ES_URL).")
    api_key: str | None = Field(
        None, repr=False, description="API key, base64 id:key (IOLENS_ES_API_KEY)."
    )
    username: str | None = Field(None, description="Basic-auth user (IOLENS_ES_USERNAME).")
    password: str | None = Field(
        None, repr=False, description="Basic-auth password (IOLENS_ES_PASSWORD)."
    )
    ca_certs: str | None = Field(None, description="CA certificate file (IOLENS_ES_CA_CERTS).")
    verify_certs: bool = Field(True, description="Verify the server's TLS certificate.")
    request_timeout_s: float = Field(30.0, gt=0, description="Per-request timeout in seconds.")
    namespace: str = Field(
        "default", description="Data stream namespace: {type}-{dataset}-{namespace}."
    )
    password_file: str | None = Field(
        None,
        description="File holding the password (IOLENS_ES_PASSWORD_FILE); it must not be "
        "readable by group or others (chmod 600).",
    )
    api_key_file: str | None = Field(
        None,
        description="File holding the API key (IOLENS_ES_API_KEY_FILE); it must not be "
        "readable by group or others.",
    )

    @model_validator(mode="before")
    @classmethod
    def _secrets_from_files(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        out = dict(data)
        for key in ("password", "api_key"):
            path = out.get(f"{key}_file")
            if path and not out.get(key):
                out[key] = read_secret(str(path))
        return out

    @field_validator("namespace")
    @classmethod
    def _namespace_ok(cls, v: str) -> str:
        bad = set('-\\/*?"<>|,# ') | {c for c in v if c.isupper()}
        if not v or any(c in bad for c in v) or len(v) > 100:
            raise ValueError("must be lower case, at most 100 characters, without '-' or spaces")
        return v


class EmbeddedSettings(_Frozen):
    """The embedded Elasticsearch-API development server (noida-db)."""

    enabled: bool = Field(
        True, description="Start it when nothing answers at a localhost elasticsearch.url."
    )
    data_dir: str = Field("var/noida-db", description="Where the embedded server keeps its data.")
    start_timeout_s: float = Field(20.0, gt=0, description="How long to wait for it to answer.")


DropType = Literal["fio-hist", "sadf", "sadc", "darshan", "slurm", "lmt", "events"]

DEFAULT_PATTERNS: dict[str, str] = {
    "fio-hist": "*_clat_hist.*.log*",
    "sadf": "*",
    "sadc": "*",
    "darshan": "*.darshan",
    "slurm": "*",
    "lmt": "*.csv",
    "events": "*.jsonl",
}


class DropSettings(_Frozen):
    """One drop directory watched by a shipper."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    type: DropType = Field(
        description="Input format of the files dropped here: fio-hist (fio histogram logs), "
        "sadf (sadf -d CSV, tailed, or sadf -j JSON), sadc (sadc binary activity files, read "
        "whole through sadf on this host), darshan (Darshan binary logs, or darshan-parser "
        "text dumps named *.txt, read whole once stable), slurm (sacct --parsable2 output, "
        "tailed), lmt (LMT per-OST CSV exports with cumulative counters, tailed), events "
        "(JSON-lines application and kernel event logs, tailed and joined into requests with "
        "the drop's schema)."
    )
    path: str = Field(description="Directory to watch (recursively).")
    pattern: str | None = Field(
        None,
        description="Glob of file names to read; default *_clat_hist.*.log* for fio-hist, "
        "*.darshan for darshan (Darshan renames *.darshan_partial when the log is complete), "
        "*.csv for lmt, *.jsonl for events, every file for sadf, sadc and slurm.",
    )
    host: str | None = Field(
        None,
        description="host.name for files here; default: the file name's host suffix, else the "
        "first sub-directory under the drop directory, else this machine's name.",
    )
    schema_file: str | None = Field(
        None,
        alias="schema",
        description="events drops: the event schema (YAML, see config/schemas/) that joins the "
        "events of each file into requests; each file is one machine's stream (its application "
        "events and, appended to it, its kernel context switches).",
    )
    tz: str = Field(
        "UTC",
        description="Time zone of local date-times in the files (slurm: the TZ sacct ran in; "
        "lmt: the LMT database's), an IANA name such as America/Los_Angeles.",
    )

    @field_validator("tz")
    @classmethod
    def _tz_known(cls, v: str) -> str:
        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {v!r} (use an IANA name, e.g. UTC)") from None
        return v

    @model_validator(mode="after")
    def _schema_for_events(self) -> DropSettings:
        if self.type == "events" and not self.schema_file:
            raise ValueError("an events drop needs schema: the event schema file (YAML)")
        if self.type != "events" and self.schema_file:
            raise ValueError("schema: is only for events drops")
        return self

    @property
    def glob(self) -> str:
        """The file-name pattern in force."""
        return self.pattern or DEFAULT_PATTERNS[self.type]


class ShipperSettings(_Frozen):
    """Drop-directory watching and tailing."""

    observer: Literal["native", "polling"] = Field(
        "native",
        description="native = inotify; polling = stat scans (needed on NFS/GPFS/Lustre, where "
        "inotify misses writes from other nodes).",
    )
    poll_interval_s: float = Field(1.0, gt=0, description="Scan period of the polling observer.")
    fingerprint_bytes: int = Field(
        65536,
        ge=16,
        description="At most this many leading bytes (up to the first line end) are hashed into "
        "a file's identity; fio logs share their first kilobytes, so the whole first line counts.",
    )
    read_chunk_bytes: int = Field(
        4 << 20, ge=4096, description="At most this many bytes are read per file per pass."
    )


class FioSettings(_Frozen):
    """fio histogram logs and their reduction (seed 000)."""

    interval_ms: int = Field(1000, gt=0, description="Output interval of metrics-fio.latency.")
    method: Literal["window", "flp"] = Field(
        "window",
        description="window = each record's counts go to the interval its completion window "
        "falls in; flp = fiologparser_hist.py's time-weighting (seed 000).",
    )
    percentiles: tuple[float, ...] = Field(
        (50.0, 90.0, 95.0, 99.0, 99.9), description="Percentiles stored as fio.clat_ns.pNN."
    )
    bins: Literal["auto", "ns", "us"] = Field(
        "auto",
        description="Bin layout: auto detects from the column count (1856/2^c bins = ns, fio >= "
        "2.99); us forces the 1216-bin layout of fio 2.14 to < 2.99.",
    )
    group_nr: int | None = Field(
        None, ge=1, le=64, description="Force FIO_IO_U_PLAT_GROUP_NR (29 for fio >= 2.99)."
    )
    run_start: datetime | None = Field(
        None,
        description="Wall-clock time of time 0 in job-relative logs. Default: per host, the "
        "first log's modification time minus its last timestamp, recorded when first seen.",
    )
    host_offsets_ms: Mapping[str, int] = Field(
        default_factory=dict,
        description="Per host, ms added to its timestamps (seed 000: hosts started late).",
    )
    settle_s: float = Field(
        10.0,
        ge=0,
        description="An interval's merged percentiles are computed once no histogram of it has "
        "arrived for this long.",
    )

    @field_validator("percentiles")
    @classmethod
    def _pct_range(cls, v: tuple[float, ...]) -> tuple[float, ...]:
        if not v or any(not 0 < p < 100 for p in v):
            raise ValueError("percentiles must lie strictly between 0 and 100")
        return tuple(sorted(set(v)))


class PeerSettings(_Frozen):
    """Black-box peer comparison of LUNs from sysstat disk metrics (seed 001, section 4.2)."""

    metrics: tuple[str, ...] = Field(
        ("await",), description="sysstat -d metrics compared across peers (await, tps, ...)."
    )
    downsample_s: float = Field(15.0, gt=0, description="Downsampling interval (seconds).")
    ma_width: int = Field(15, ge=1, description="Moving-average filter width (samples).")
    win_size: int = Field(60, ge=4, description="Comparison window (samples).")
    win_shift: int = Field(30, ge=1, description="Shift between windows (samples).")
    k: int = Field(3, ge=1, description="Faulty when anomalous in k of the last 2k-1 windows.")
    bin_cap: int = Field(1000, ge=1, description="Most histogram bins per window.")
    groups: Mapping[str, str] = Field(
        default_factory=dict,
        description="Peer groups: glob of 'host:device' -> group name (first match wins); "
        "unmatched LUNs form one group per host.",
    )
    thresholds_file: str | None = Field(
        None, description="Trained thresholds (iolens train); default <state_dir>/thresholds.json."
    )
    settle_s: float = Field(
        120.0,
        ge=0,
        description="The scheduled comparison takes samples older than this, so that every "
        "server's data for a moment has arrived.",
    )
    ranking_every_s: float = Field(
        3600.0,
        gt=0,
        description="Period of the persistence ranking (seed: hourly); a ranking is indexed at "
        "the end of every period of UTC time.",
    )


class DarshanSettings(_Frozen):
    """Darshan job logs: reading, and the root-cause analysis of low-bandwidth jobs (seed 004)."""

    workers: int = Field(
        0,
        ge=0,
        description="Processes reading and analysing logs in parallel; 0 = one per CPU.",
    )
    inline: bool = Field(
        False,
        description="Read logs in the shipper's own process instead of worker processes: no "
        "start-up cost, but a damaged log that crashes darshan-util then stops the shipper.",
    )
    stable_s: float = Field(
        5.0,
        ge=0,
        description="A log is read once its size and modification time have not changed for "
        "this long (Darshan writes a log once, at the end of the job).",
    )
    min_nprocs: int = Field(
        1000, ge=0, description="Low-bandwidth jobs: more processes than this (seed: 1,000)..."
    )
    min_bytes_per_proc: float = Field(
        10 * 2**20,
        ge=0,
        description="...at least this many bytes per process in the direction (seed: 10 MB)...",
    )
    max_bytes_per_s: float = Field(
        2**30,
        gt=0,
        description="...and a critical-path bandwidth below this, bytes/s (seed: 1 GB/s).",
    )
    lmt_fs: str | None = Field(
        None,
        description="File system name (lmt.ost.fs) whose LMT load the diagnosis compares; "
        "default: any.",
    )
    ost_luns: Mapping[str, str] = Field(
        default_factory=dict,
        description="OST index -> LUN 'host/device' in the peer comparison, so that a "
        "critical file's OST can be matched with peer-anomaly results.",
    )
    mounts: Mapping[str, str] = Field(
        default_factory=dict,
        description="Mount point -> LUN 'host/device' in the peer comparison (or a device "
        "'/dev/sdc', taken as a LUN of this host), so that a critical file on any file system "
        "(ext4, XFS, GPFS, NFS) can be matched with peer-anomaly results; the longest mount "
        "point holding the file wins.",
    )
    proc_mounts: bool = Field(
        True,
        description="Mount points not in darshan.mounts are looked up in this host's "
        "/proc/mounts when the log is read (block devices only; the LUN is "
        "'<this host>/<device>').",
    )


class RequestsSettings(_Frozen):
    """Requests of events drops: behavioural clustering into the workload model (seed 002)."""

    threshold: float = Field(
        2.0,
        gt=0,
        description="Distance above which a request starts a new cluster (1 unit = 1 ms of "
        "CPU or 1 KiB, plus 1 per token of different structure).",
    )
    snapshot_s: float = Field(
        60.0,
        gt=0,
        description="How often the workload model is written to metrics-iolens.workload_model "
        "while requests arrive (and once at the end of a run).",
    )


class SinkSettings(_Frozen):
    """Bulk indexing, retries, spool and dead letters."""

    chunk_max_docs: int = Field(500, gt=0, description="Send a bulk request at this many docs.")
    chunk_max_bytes: int = Field(10 << 20, gt=0, description="...or at this many bytes of NDJSON.")
    flush_interval_s: float = Field(1.0, gt=0, description="...or this long after the first doc.")
    max_retries: int = Field(8, ge=0, description="Retries of 429/5xx items before spooling.")
    backoff_initial_s: float = Field(0.5, gt=0, description="First retry delay.")
    backoff_max_s: float = Field(30.0, gt=0, description="Cap of the retry delay.")
    spool_max_bytes: int = Field(
        1 << 30,
        gt=0,
        description="Most bytes of undelivered documents kept in the on-disk spool while "
        "Elasticsearch is away; when it is full, reading waits (nothing is dropped).",
    )
    queue_docs: int = Field(
        10000,
        gt=0,
        description="Most documents waiting between the reading thread and the sink's sender "
        "thread; reading waits when it is full, so memory stays bounded when Elasticsearch is "
        "slow.",
    )


class ServiceRateSettings(_Frozen):
    """Online non-blocking service rates of the pipeline's stages (seed 003)."""

    enabled: bool = Field(
        True,
        description="Sample the queue between reading and the sink and estimate both stages' "
        "service rates (metrics-iolens.service_rate, iolens status).",
    )
    t0_s: float = Field(
        0.05,
        gt=0,
        description="First sampling period (it doubles while it is tuned). A sleeping Python "
        "monitor cannot keep periods much shorter.",
    )
    cap_s: float = Field(
        2.0,
        gt=0,
        description="Longest sampling period: it should span several bulk requests, since the "
        "sink takes documents a bulk request at a time.",
    )
    target_bulk_s: float = Field(
        0.5,
        gt=0,
        description="Bulk requests hold about this much of the sink's measured service rate "
        "(at most sink.chunk_max_docs documents).",
    )


class SlaSettings(_Frozen):
    """A latency service level: ``percentile`` % of completions under ``under_s`` seconds."""

    percentile: float = Field(gt=0, lt=100, description="The percentile, e.g. 95 or 99.9.")
    under_s: float = Field(gt=0, description="Its limit in seconds.")


class AlertSettings(_Frozen):
    """Kibana alert rules created by ``iolens setup --kibana-url`` (reference/elastic.md 5.2)."""

    sla: tuple[SlaSettings, ...] = Field(
        (SlaSettings(percentile=95, under_s=1.0), SlaSettings(percentile=99, under_s=5.0)),
        description="Latency service levels, one rule each on the cluster-wide merged "
        "percentile of every interval (metrics-fio.latency); the percentile must be one of "
        "fio.percentiles.",
    )
    window_m: int = Field(5, gt=0, description="Minutes of intervals an SLA rule looks at.")
    interval: str = Field("1m", description="How often the rules run (Kibana interval syntax).")
    persistence_threshold: float = Field(
        10.0,
        gt=0,
        description="A LUN whose persistence accumulator reaches this fires the "
        "persistent-anomaly rule (+1 per anomalous window, -1 per normal one).",
    )
    sink_utilisation: float = Field(
        0.95,
        gt=0,
        description="The pipeline-health rule fires when the sink's utilisation stays above "
        "this for 15 minutes.",
    )
    max_lag_s: float = Field(
        300.0,
        gt=0,
        description="The pipeline-health rule also fires when a document waited longer than "
        "this from being read to being acknowledged (metrics-iolens.pipeline), or when dead "
        "letters were added.",
    )
    action: Literal["server-log", "index", "webhook"] = Field(
        "server-log",
        description="Where alerts go: Kibana's log or an index (iolens-alerts-<namespace>),"
        " both on a Basic licence; webhook needs Gold.",
    )
    webhook_url: str | None = Field(None, description="The webhook's URL (action: webhook).")

    @model_validator(mode="after")
    def _webhook_has_url(self) -> AlertSettings:
        if self.action == "webhook" and not self.webhook_url:
            raise ValueError("action webhook needs webhook_url")
        return self


class IncidentSettings(_Frozen):
    """Incidents: a persistently anomalous LUN, the fio SLA breaches and the Darshan jobs
    whose critical files sit on it, on one time axis (``logs-iolens.incident``)."""

    enabled: bool = Field(True, description="Run the incident job.")
    sla: SlaSettings = Field(
        SlaSettings(percentile=95, under_s=1.0),
        description="An fio job's interval breaches the SLA when this percentile of its "
        "completion latency (metrics-fio.latency, job scope) is over the limit; the percentile "
        "must be one of fio.percentiles.",
    )
    gap_s: float = Field(
        120.0,
        ge=0,
        description="Faulty windows of one LUN closer than this belong to one incident; an "
        "incident closes when the LUN has been evaluated and not faulty for this long.",
    )
    margin_s: float = Field(
        60.0,
        ge=0,
        description="fio breaches this long before the incident's start count with it (the "
        "peer comparison indicts a LUN up to a window after fio sees it slow).",
    )
    lookback_s: float = Field(
        3600.0,
        gt=0,
        description="Incidents that started this recently (and open ones) are evaluated again "
        "on every run, so Darshan logs written at the end of long jobs still join them; an open "
        "incident whose LUN is not evaluated for this long closes.",
    )


class JobsSettings(_Frozen):
    """Scheduled jobs."""

    tick_s: float = Field(5.0, gt=0, description="How often the scheduler looks for work.")


class Settings(_Frozen):
    """The whole configuration of one iolens instance."""

    elasticsearch: ElasticsearchSettings = Field(default_factory=ElasticsearchSettings)
    embedded: EmbeddedSettings = Field(default_factory=EmbeddedSettings)
    state_dir: str = Field("var/state", description="Registry, spool and dead letters.")
    drops: tuple[DropSettings, ...] = Field((), description="Drop directories to watch.")
    shipper: ShipperSettings = Field(default_factory=ShipperSettings)
    fio: FioSettings = Field(default_factory=FioSettings)
    peer: PeerSettings = Field(default_factory=PeerSettings)
    darshan: DarshanSettings = Field(default_factory=DarshanSettings)
    requests: RequestsSettings = Field(default_factory=RequestsSettings)
    sink: SinkSettings = Field(default_factory=SinkSettings)
    service_rate: ServiceRateSettings = Field(default_factory=ServiceRateSettings)
    alerts: AlertSettings = Field(default_factory=AlertSettings)
    incident: IncidentSettings = Field(default_factory=IncidentSettings)
    jobs: JobsSettings = Field(default_factory=JobsSettings)


_ENV = {
    "IOLENS_ES_URL": "url",
    "IOLENS_ES_API_KEY": "api_key",
    "IOLENS_ES_USERNAME": "username",
    "IOLENS_ES_PASSWORD": "password",
    "IOLENS_ES_CA_CERTS": "ca_certs",
    "IOLENS_ES_PASSWORD_FILE": "password_file",
    "IOLENS_ES_API_KEY_FILE": "api_key_file",
}


def read_secret(path: str) -> str:
    """The secret in ``path`` (surrounding white space dropped).

    Raises:
        ValueError: the file is missing, unreadable, empty, or readable by group or others
            (the message names the file and its mode).
    """
    try:
        st = os.stat(path)
        if st.st_mode & 0o077:
            raise ValueError(
                f"{path} is readable by group or others (mode {st.st_mode & 0o777:04o}); "
                "chmod 600 it"
            )
        secret = Path(path).read_text(encoding="utf-8").strip()
    except OSError as err:
        raise ValueError(f"{path}: {err.strerror}") from None
    if not secret:
        raise ValueError(f"{path} is empty")
    return secret


def _describe(err: ValidationError, source: str) -> str:
    lines = [f"{source}: invalid configuration"]
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"]) or "(top level)"
        lines.append(f"  {key}: {e['msg']}")
    return "\n".join(lines)


def settings_from_mapping(
    data: Mapping[str, Any], env: Mapping[str, str] | None = None, source: str = "config"
) -> Settings:
    """Validate a configuration mapping, applying the ``IOLENS_ES_*`` environment overrides.

    Raises:
        ConfigError: naming every offending key (``fio.interval_ms: ...``).
    """
    merged: dict[str, Any] = dict(data)
    given = merged.get("elasticsearch")
    if given is None or isinstance(given, Mapping):
        # (anything else is left for validation to name: elasticsearch must be a mapping)
        es = dict(given or {})
        for var, key in _ENV.items():
            value = (env if env is not None else os.environ).get(var)
            if value:
                es[key] = value
        if es:
            merged["elasticsearch"] = es
    try:
        return Settings.model_validate(merged)
    except ValidationError as err:
        raise ConfigError(_describe(err, source)) from None


def load_settings(path: str | Path | None, env: Mapping[str, str] | None = None) -> Settings:
    """Load the YAML file at ``path`` (defaults only when None) and validate it.

    Raises:
        ConfigError: the file is missing or unreadable, is not UTF-8 YAML (tags that would
            build Python objects are refused: it is read with ``yaml.safe_load``), or has a
            bad or unknown key.
    """
    if path is None:
        return settings_from_mapping({}, env, "defaults")
    p = Path(path)
    data = _yaml_file(p, "configuration file", "pass --config FILE") or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: the top level must be a mapping of keys")
    return settings_from_mapping(data, env, str(p))


def _yaml_file(p: Path, what: str, fix: str) -> Any:
    """The YAML document in ``p`` (``yaml.safe_load``: plain data only, never objects).

    Raises:
        ConfigError: naming ``p`` and the problem: missing (with ``fix``), unreadable, not
            UTF-8, not YAML, or nested too deeply to read.
    """
    try:
        return yaml.safe_load(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{p}: {what} not found ({fix})") from None
    except OSError as err:
        raise ConfigError(f"{p}: cannot read the {what}: {err.strerror or err}") from None
    except UnicodeDecodeError as err:
        raise ConfigError(f"{p}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{p}: not valid YAML: {err}") from None
    except RecursionError:
        raise ConfigError(f"{p}: not valid YAML: nested too deeply") from None


def json_schema() -> dict[str, Any]:
    """The JSON Schema of :class:`Settings` (written to ``config/schemas/pipeline.schema.json``)."""
    return Settings.model_json_schema()


if __name__ == "__main__":
    import json
    import sys

    sys.stdout.write(json.dumps(json_schema(), indent=2, sort_keys=True) + "\n")
