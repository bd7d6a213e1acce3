"""What every subcommand shares: logging setup and settings from the global options."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

from pipeline.settings import Settings, load_settings

DEFAULT_CONFIG = Path("config/pipeline.yaml")


class _EcsJsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc = {
            "@timestamp": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "log.level": record.levelname.lower(),
            "log.logger": record.name,
            "message": record.getMessage(),
            "ecs.version": "8.11.0",
        }
        if record.exc_info:
            doc["error.stack_trace"] = self.formatException(record.exc_info)
        return json.dumps(doc)


def setup_logging(level: str, as_json: bool) -> None:
    """One logging setup for the process: UTC timestamps, or ECS JSON lines."""
    handler = logging.StreamHandler(sys.stderr)
    if as_json:
        handler.setFormatter(_EcsJsonFormatter())
    else:
        fmt = logging.Formatter("%(asctime)sZ %(levelname)s %(name)s: %(message)s")
        fmt.converter = time.gmtime
        handler.setFormatter(fmt)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("elastic_transport").setLevel(logging.WARNING)
    logging.getLogger("watchdog").setLevel(logging.WARNING)


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Load ``--config`` (or ``config/pipeline.yaml`` when present) and apply ``--es-url``.

    Raises:
        ConfigError: bad or unknown keys, naming them.
    """
    path = args.config
    if path is None and DEFAULT_CONFIG.is_file():
        path = DEFAULT_CONFIG
    settings = load_settings(path)
    if args.es_url:
        es = settings.elasticsearch.model_copy(update={"url": args.es_url})
        settings = settings.model_copy(update={"elasticsearch": es})
    return settings


class Cluster:
    """The cluster a command talks to: a client, plus the embedded server if one was started.

    Use as a context manager; a server started without ``detach`` is stopped on exit.
    """

    def __init__(self, settings: Settings, *, detach: bool = False, embedded: bool = True) -> None:
        from pipeline.sink.client import make_client
        from pipeline.sink.embedded import ensure_cluster

        emb = settings.embedded
        if not embedded:
            emb = emb.model_copy(update={"enabled": False})
        self.url, self.server = ensure_cluster(
            settings.elasticsearch, emb, logging.getLogger("iolens"), detach=detach
        )
        self.detached = detach
        self.client = make_client(settings.elasticsearch, self.url)

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()
        if self.server is not None and not self.detached:
            self.server.stop()
