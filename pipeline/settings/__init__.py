"""One typed, frozen configuration model, loaded from ``config/pipeline.yaml``.

The model is closed to unknown keys (a misspelt key is an error that names it). Environment
variables override the Elasticsearch connection: ``IOLENS_ES_URL``, ``IOLENS_ES_API_KEY``,
``IOLENS_ES_USERNAME``, ``IOLENS_ES_PASSWORD``, ``IOLENS_ES_CA_CERTS``. Nothing is loaded at import
time; the CLI calls :func:`load_settings`.

One module per section of the file: :mod:`~pipeline.settings.connection` (``elasticsearch``,
``embedded``), :mod:`~pipeline.settings.drops` (``drops``, ``shipper``),
:mod:`~pipeline.settings.analysis` (``fio``, ``peer``, ``darshan``, ``requests``),
:mod:`~pipeline.settings.sink` (``sink``, ``service_rate``), :mod:`~pipeline.settings.alerts`
(``alerts``, ``incident``); :mod:`~pipeline.settings.model` puts them together as
:class:`Settings` and :mod:`~pipeline.settings.load` reads and validates a file.
``iolens config schema`` prints the JSON Schema (with the drop formats of
:mod:`pipeline.formats.registry`).
"""

from pipeline.settings.alerts import AlertSettings, IncidentSettings, SlaSettings
from pipeline.settings.analysis import DarshanSettings, FioSettings, PeerSettings, RequestsSettings
from pipeline.settings.connection import ElasticsearchSettings, EmbeddedSettings, read_secret
from pipeline.settings.drops import DropSettings, ShipperSettings
from pipeline.settings.load import (
    DEFAULT_CONFIG,
    json_schema,
    load_settings,
    settings_from_mapping,
)
from pipeline.settings.model import JobsSettings, Settings
from pipeline.settings.sink import ServiceRateSettings, SinkSettings

__all__ = [
    "DEFAULT_CONFIG",
    "AlertSettings",
    "DarshanSettings",
    "DropSettings",
    "ElasticsearchSettings",
    "EmbeddedSettings",
    "FioSettings",
    "IncidentSettings",
    "JobsSettings",
    "PeerSettings",
    "RequestsSettings",
    "ServiceRateSettings",
    "Settings",
    "ShipperSettings",
    "SinkSettings",
    "SlaSettings",
    "json_schema",
    "load_settings",
    "read_secret",
    "settings_from_mapping",
]
