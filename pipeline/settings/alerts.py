"""Service levels, the Kibana alert rules on them, and incidents."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from pipeline.settings.base import Frozen


class SlaSettings(Frozen):
    """A latency service level: ``percentile`` % of completions under ``under_s`` seconds."""

    percentile: float = Field(gt=0, lt=100, description="The percentile, e.g. 95 or 99.9.")
    under_s: float = Field(gt=0, description="Its limit in seconds.")


class AlertSettings(Frozen):
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
        description="Where alerts go: Kibana's log or the data stream "
        "logs-iolens.alert-<namespace>, both on a Basic licence; webhook needs Gold.",
    )
    webhook_url: str | None = Field(None, description="The webhook's URL (action: webhook).")

    @model_validator(mode="after")
    def _webhook_has_url(self) -> AlertSettings:
        if self.action == "webhook" and not self.webhook_url:
            raise ValueError("action webhook needs webhook_url")
        return self


class IncidentSettings(Frozen):
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
