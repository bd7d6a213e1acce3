"""``iolens kibana build|unpack``: the git-kept Kibana saved objects to and from import NDJSON.

``build --out objects.ndjson`` packs ``kibana/<type>/<id>.json`` into the file that
``POST /api/saved_objects/_import?overwrite=true`` takes (header ``kbn-xsrf: true``, the file in
the multipart part ``file``). ``unpack --from export.ndjson`` writes an import or export file
back into the git layout, one pretty-printed file per object.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from pipeline.cli.subcommand import Subparsers, add_command
from pipeline.errors import ConfigError
from pipeline.kibana import DEFAULT_DIR, build, from_ndjson, write_layout


def add_parser(sub: Subparsers, name: str) -> None:
    """Register the subcommand."""
    p = add_command(
        sub, name, "pack the Kibana saved objects into import NDJSON, or unpack an export", __doc__
    )
    p.add_argument("action", choices=["build", "unpack"])
    p.add_argument(
        "--dir",
        type=Path,
        help="the git layout (build: default the objects shipped with iolens; unpack: required, "
        "e.g. kibana in a checkout)",
    )
    p.add_argument("--out", type=Path, help="build: the NDJSON file to write")
    p.add_argument("--from", dest="source", type=Path, help="unpack: the NDJSON file to read")


def run(args: argparse.Namespace) -> int:
    """``build`` writes ``--out``; ``unpack`` writes ``--dir``; both report the object count."""
    console = Console(stderr=True)
    if args.action == "build":
        if args.out is None:
            raise ConfigError("kibana build needs --out FILE (the NDJSON to import)")
        text = build(args.dir or DEFAULT_DIR)
        args.out.write_text(text, encoding="utf-8")
        console.print(f"{args.out}: {text.count(chr(10))} saved objects", highlight=False)
        return 0
    if args.source is None:
        raise ConfigError("kibana unpack needs --from FILE (an import or export NDJSON)")
    if args.dir is None:
        raise ConfigError(
            "kibana unpack needs --dir DIR (where to write the layout; kibana in a checkout): "
            "it never writes into the installed package"
        )
    try:
        text = args.source.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"{args.source}: cannot read ({err.strerror})") from None
    written = write_layout(from_ndjson(text), args.dir)
    console.print(f"{args.dir}: wrote {len(written)} saved objects", highlight=False)
    return 0
