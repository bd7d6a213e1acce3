"""The whole configuration: one section per concern, each in its own module."""

from __future__ import annotations

from pydantic import Field

from pipeline.settings.alerts import AlertSettings, IncidentSettings
from pipeline.settings.analysis import DarshanSettings, FioSettings, PeerSettings, RequestsSettings
from pipeline.settings.base import Frozen
from pipeline.settings.connection import ElasticsearchSettings, EmbeddedSettings
from pipeline.settings.drops import DropSettings, ShipperSettings
from pipeline.settings.sink import ServiceRateSettings, SinkSettings


class JobsSettings(Frozen):
    """Scheduled jobs."""

    tick_s: float = Field(5.0, gt=0, description="How often the scheduler looks for work.")
    lease_ttl_s: float = Field(
        120.0,
        gt=0,
        description="How long a scheduled job's lease outlives its holder's last renewal "
        "(at least 3 ticks): after a holder dies or is cut off, another instance takes the "
        "peer comparison and the incidents over within this time.",
    )
    max_clock_offset_s: float = Field(
        2.0,
        gt=0,
        description="Largest offset of this host's clock from the cluster's taken as "
        "synchronised; beyond it iolens warns once (the offset is in every "
        "metrics-iolens.pipeline document and in iolens status).",
    )
    clock_check_s: float = Field(
        300.0, gt=0, description="Seconds between measurements of the clock offset."
    )


class Settings(Frozen):
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
