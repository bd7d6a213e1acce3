"""What the subcommands that talk to a cluster share: settings from the global options and the
connection (with the embedded server when needed)."""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

from pipeline.settings import DEFAULT_CONFIG, Settings, load_settings

CONFIG_ENV = "IOLENS_CONFIG"


def config_path(args: argparse.Namespace) -> Path | None:
    """The configuration file a command reads: ``--config``, else ``$IOLENS_CONFIG``, else
    ``config/pipeline.yaml`` in the current directory when there is one (a checkout, or a
    directory laid out like one); ``None``: the built-in defaults."""
    if args.config is not None:
        return Path(args.config)
    if os.environ.get(CONFIG_ENV):
        return Path(os.environ[CONFIG_ENV])
    return DEFAULT_CONFIG if DEFAULT_CONFIG.is_file() else None


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Load the configuration (:func:`config_path`) and apply ``--es-url``.

    Raises:
        ConfigError: bad or unknown keys, naming them.
    """
    settings = load_settings(config_path(args))
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
