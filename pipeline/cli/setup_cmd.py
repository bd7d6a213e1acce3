"""``iolens setup [--kibana-url URL]``: everything the cluster needs, in order, idempotently.

Against Elasticsearch: the index and component templates of ``mappings/`` and (where supported)
the ILM policy; then the Watcher definitions of ``kibana/watches/`` when the licence has
Watcher (Gold, Platinum, Enterprise or trial). With ``--kibana-url`` (or ``IOLENS_KIBANA_URL``),
against Kibana with the same credentials: the saved objects of ``kibana/`` (data views and
dashboards, imported with ``overwrite=true``; the import's ``success`` is checked) and the alert
rules of :mod:`pipeline.alerting` with their connector, through the alerting API. Each object is
reported, and what is skipped is said with the reason (licence, API missing).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

from pipeline.alerting import WATCHER_LICENCES, install_alerting, watches
from pipeline.cli.common import Cluster, settings_from_args
from pipeline.cli.subcommand import Subparsers
from pipeline.kibana import build
from pipeline.kibana_client import Kibana, KibanaError
from pipeline.settings import Settings
from pipeline.sink.capabilities import detect, licence_type
from pipeline.sink.client import Client
from pipeline.sink.templates import install, load_templates


def add_parser(sub: Subparsers, name: str) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        name,
        help="install templates, ILM, watches, and (with --kibana-url) dashboards and rules",
        description=__doc__,
    )
    p.add_argument(
        "--kibana-url",
        default=os.environ.get("IOLENS_KIBANA_URL"),
        help="Kibana to install data views, dashboards and alert rules into",
    )


def install_watches(client: Client, settings: Settings, licence: str | None) -> list[str]:
    """``PUT _watcher/watch/<id>`` for every watch, when the licence has Watcher."""
    found = list(watches(settings))
    if licence not in WATCHER_LICENCES:
        why = "licence unknown" if licence is None else f"this cluster's licence is {licence}"
        return [f"skipped: {len(found)} watch(es) (Watcher needs Gold or a trial; {why})"]
    out = []
    for wid, body in found:
        client.watcher.put_watch(id=wid, body=body)
        out.append(f"installed watch {wid}")
    return out


def kibana_for(settings: Settings, url: str) -> Kibana:
    """A Kibana client with the Elasticsearch credentials of ``settings``."""
    es = settings.elasticsearch
    return Kibana(
        url,
        username=es.username,
        password=es.password,
        api_key=es.api_key,
        timeout_s=es.request_timeout_s,
    )


def install_kibana(
    kibana: Kibana,
    settings: Settings,
    licence: str | None,
    objects: Callable[[], bytes] | None = None,
) -> list[str]:
    """Saved objects (when ``objects`` gives their NDJSON), then the alert rules.

    Raises:
        KibanaError: Kibana refused a request or the import failed.
    """
    out: list[str] = []
    if objects is not None:
        result = kibana.import_objects(objects())
        for r in result.get("successResults", []):
            title = r.get("meta", {}).get("title") or r.get("id")
            out.append(f"imported {r.get('type')} {title}")
    out += install_alerting(kibana, settings, licence)
    return out


def saved_objects() -> bytes:
    """The NDJSON of ``kibana/``'s data views, Lens charts and dashboards."""
    return build().encode()


def run(args: argparse.Namespace) -> int:
    """Install; prints what was done, skipped and why. 2 when Kibana refused something."""
    settings = settings_from_args(args)
    with Cluster(settings) as cluster:
        caps = detect(cluster.client)
        for msg in caps.messages:
            print(msg)
        for msg in install(cluster.client, load_templates(), caps):
            print(msg)
        licence = licence_type(cluster.client)
        for msg in install_watches(cluster.client, settings, licence):
            print(msg)
    if not args.kibana_url:
        print("skipped: data views, dashboards and alert rules (no --kibana-url)")
        return 0
    try:
        msgs = install_kibana(
            kibana_for(settings, args.kibana_url), settings, licence, saved_objects
        )
    except KibanaError as err:
        print(f"Kibana: {err}")
        return 2
    for msg in msgs:
        print(msg)
    return 0
