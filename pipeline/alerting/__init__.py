"""Alert rules for the service levels the seeds describe, created through Kibana's alerting API.

Rules exported as saved objects come back disabled and connectors lose their secrets, so
``iolens setup --kibana-url`` creates them through the API instead (reference/elastic.md 5.2):
a connector, then each rule, under fixed ids (UUIDs derived from the rule's name and the
namespace), so a second setup updates them rather than adding copies. The rules are data files,
``kibana/rules/*.json`` (:mod:`pipeline.alerting.rules` fills in the per-install values):

* **latency SLA** per configured percentile (``alerts.sla``, by default "95 % under 1 s" and
  "99 % under 5 s", seed 000): ``.index-threshold`` on the merged cluster-wide percentile of
  each interval (``fio.clat_ns.p95``... of ``metrics-fio.latency``), per direction;
* **persistent anomaly** (seed 001): a LUN whose persistence accumulator
  (``iolens.persistence.value``) passes ``alerts.persistence_threshold``;
* **low-bandwidth jobs** (seed 004): a job diagnosed as low-bandwidth
  (``logs-iolens.io_diagnosis`` with ``low_bandwidth: true``) in the last hour;
* **pipeline health** (seed 003): a host's sink saturated, its utilisation above
  ``alerts.sink_utilisation`` for 15 minutes (``metrics-iolens.service_rate``); documents
  waiting longer than ``alerts.max_lag_s`` from being read to being acknowledged, and new dead
  letters (``metrics-iolens.pipeline``, written every tick of ``iolens run``);
* **storage incident**: an open incident opened or revised (``logs-iolens.incident``: a LUN
  persistently anomalous among its peers with the fio SLA breaches and Darshan jobs on it), an
  ``.es-query`` rule with one alert per incident.

``docs/kibana.md`` gives each rule's condition as a sentence (a table the tests read) and every
rule looks back at least ``alerts.max_lag_s + alerts.interval``, so that a document indexed as
late as the pipeline tolerates is still seen (:func:`pipeline.alerting.rules.lag_window_s`).

Actions go to a connector that works on a Basic licence: ``server-log`` (Kibana's log) or
``index`` (an alert document per firing into the data stream ``logs-iolens.alert-<namespace>``,
which the Watcher definitions write to as well); ``webhook`` (Gold and up) posts to
``alerts.webhook_url`` (:mod:`pipeline.alerting.connector`). Watcher definitions for licensed
clusters are in ``kibana/watches/`` (:func:`watches`) and installed only when the licence
allows (:mod:`pipeline.alerting.install`).
"""

from pipeline.alerting.connector import ID_NAMESPACE, connector
from pipeline.alerting.install import WATCHER_LICENCES, WEBHOOK_LICENCES, install_alerting
from pipeline.alerting.rules import RULES_DIR, Rule, rules
from pipeline.alerting.watches import WATCHES_DIR, watches
from pipeline.kibana_client import Kibana, KibanaError

__all__ = [
    "ID_NAMESPACE",
    "RULES_DIR",
    "WATCHER_LICENCES",
    "WATCHES_DIR",
    "WEBHOOK_LICENCES",
    "Kibana",
    "KibanaError",
    "Rule",
    "connector",
    "install_alerting",
    "rules",
    "watches",
]
