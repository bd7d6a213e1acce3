"""The drop directories shippers watch, and how they watch and tail them."""

from __future__ import annotations

from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import ConfigDict, Field, field_validator, model_validator

from pipeline.settings.base import Frozen


class DropSettings(Frozen):
    """One drop directory watched by a shipper."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    type: str = Field(
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
        description="events drops: the event schema that joins the events of each file into "
        "requests: a YAML file, or the name of one shipped with iolens (http_server); each "
        "file is one machine's stream (its application events and, appended to it, its "
        "kernel context switches).",
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


class ShipperSettings(Frozen):
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
