"""``iolens config example`` prints the commented example configuration (every key with its
default and what it means), ``iolens config schema`` its JSON Schema, and ``iolens config check``
validates the configuration given with ``--config`` (or found as every command finds it) and
says which file that was.

    iolens config example > /etc/iolens/pipeline.yaml
    iolens --config /etc/iolens/pipeline.yaml config check
"""

from __future__ import annotations

import argparse
import json

from pipeline.cli.subcommand import Subparsers, add_actions, add_command


def add_parser(sub: Subparsers, name: str) -> None:
    """Register the subcommand."""
    p = add_command(sub, name, "print the example configuration or its schema; check one", __doc__)
    actions = add_actions(p)
    actions.add_parser("example", help="the commented example configuration (YAML)")
    actions.add_parser("schema", help="the configuration's JSON Schema")
    actions.add_parser("check", help="validate the configuration and say which file it is")


def run(args: argparse.Namespace) -> int:
    """Print or check; 0, or 2 (with the offending keys named) for a bad configuration."""
    if args.action == "example":
        from pipeline.assets import example_config

        print(example_config(), end="")
    elif args.action == "schema":
        from pipeline.formats.registry import config_schema
        from pipeline.settings import json_schema

        print(json.dumps(config_schema(json_schema()), indent=2, sort_keys=True))
    else:
        from pipeline.cli.common import config_path, settings_from_args
        from pipeline.formats.registry import check_drops

        settings = settings_from_args(args)
        check_drops(settings)
        where = config_path(args)
        print(f"{where or 'built-in defaults'}: valid; state_dir {settings.state_dir}")
    return 0
