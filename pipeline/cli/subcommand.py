"""How a subcommand module registers itself with the ``iolens`` parser.

Kept apart from :mod:`pipeline.cli.common` so that registering a command loads nothing but
:mod:`argparse` (``iolens fio-hist`` starts without the configuration machinery).
"""

from __future__ import annotations

import argparse
from typing import TypeAlias

Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
"""What :meth:`argparse.ArgumentParser.add_subparsers` returns."""


def add_command(
    sub: Subparsers, name: str, help_text: str, doc: str | None
) -> argparse.ArgumentParser:
    """Register subcommand ``name``: ``help_text`` in the command list, ``doc`` (the module's
    docstring) as its description, printed with its line breaks kept."""
    return sub.add_parser(
        name,
        help=help_text,
        description=doc,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def add_actions(p: argparse.ArgumentParser) -> Subparsers:
    """The required ``ACTION`` (``args.action``) of a command made of several actions."""
    return p.add_subparsers(dest="action", required=True, metavar="ACTION")
