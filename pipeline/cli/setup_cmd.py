"""``iolens setup``: install index/component templates and (where supported) the ILM policy."""

from __future__ import annotations

import argparse

from pipeline.cli.common import Cluster, settings_from_args
from pipeline.sink.capabilities import detect
from pipeline.sink.templates import install, load_templates


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str) -> None:
    """Register the subcommand."""
    sub.add_parser(
        name, help="install templates and ILM policy into the cluster", description=__doc__
    )


def run(args: argparse.Namespace) -> int:
    """Install everything in ``mappings/``; prints what was done and what the cluster lacks."""
    settings = settings_from_args(args)
    with Cluster(settings) as cluster:
        caps = detect(cluster.client)
        for msg in caps.messages:
            print(msg)
        for msg in install(cluster.client, load_templates(), caps):
            print(msg)
    return 0
