"""``iolens service unit`` prints the systemd unit that runs ``iolens run`` as a system service,
its ``ExecStart=`` naming this installation's ``iolens`` command by its absolute path (the
virtual environment's ``bin/iolens`` when iolens is installed in one):

    iolens service unit > /etc/systemd/system/iolens.service
    systemctl daemon-reload && systemctl enable --now iolens

The service runs as the system user ``iolens`` (``--user NAME``: another one), reads
``/etc/iolens/pipeline.yaml`` (with the global ``--config FILE``: that file, made absolute),
keeps its state in ``/var/lib/iolens`` and takes its credentials from the environment file
``/etc/iolens/iolens.env``, never from the command line. ``systemctl stop`` drains: what was
read is delivered and committed before iolens exits. Installing, credentials, drop
directories owned by other users and what the hardening forbids: docs/operations/service.md.
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

from pipeline.cli.subcommand import Subparsers, add_actions, add_command

SERVICE_CONFIG = Path("/etc/iolens/pipeline.yaml")
"""The configuration the service reads unless ``--config`` names another."""

_USER_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,30}")
"""The user names systemd's ``User=`` accepts in its strict form (no quoting needed)."""


def add_parser(sub: Subparsers, name: str) -> None:
    """Register the subcommand."""
    p = add_command(sub, name, "print the systemd unit for iolens run", __doc__)
    actions = add_actions(p)
    unit = actions.add_parser("unit", help="the unit, for /etc/systemd/system/iolens.service")
    unit.add_argument(
        "--user",
        type=user_name,
        default="iolens",
        metavar="NAME",
        help="the system user (and group) the service runs as (default: iolens)",
    )


def user_name(value: str) -> str:
    """``value`` when systemd takes it as ``User=`` (an argparse ``type``).

    Raises:
        argparse.ArgumentTypeError: it is not 1 to 31 letters, digits, ``_`` or ``-``, starting
            with a letter or ``_``.
    """
    if not _USER_NAME.fullmatch(value):
        raise argparse.ArgumentTypeError(
            f"{value!r}: a user name is 1 to 31 letters, digits, '_' or '-', not starting "
            "with a digit or '-'"
        )
    return value


def run(args: argparse.Namespace) -> int:
    """Print the unit; 0, or 2 (a ``ConfigError``) when the ``iolens`` command is not found."""
    from pipeline.assets import required

    template = required("systemd", "iolens.service").read_text(encoding="utf-8")
    config = Path(os.path.abspath(args.config)) if args.config else SERVICE_CONFIG
    print(render_unit(template, console_script(), config, args.user), end="")
    return 0


def render_unit(template: str, iolens: Path, config: Path, user: str) -> str:
    """The unit ``template`` with its placeholders filled in.

    Args:
        template: the text of ``pipeline/assets/systemd/iolens.service``.
        iolens: absolute path of the ``iolens`` command (``@IOLENS@``).
        config: absolute path of the configuration (``@CONFIG@``).
        user: the service's user and group (``@USER@``), checked by :func:`user_name`.

    Returns:
        The unit, the paths quoted for a systemd command line (:func:`unit_word`).

    Raises:
        ValueError: a path is relative.
    """
    for path in (iolens, config):
        if not path.is_absolute():
            raise ValueError(f"{path}: the unit needs an absolute path")
    return (
        template.replace("@IOLENS@", unit_word(str(iolens)))
        .replace("@CONFIG@", unit_word(str(config)))
        .replace("@USER@", user)
    )


def unit_word(word: str) -> str:
    """``word`` as one word of a systemd command line (``systemd.service(5)``, "Command lines"):
    ``%`` and ``$`` doubled so that no specifier or variable is expanded, and double quotes
    around a word holding white space, quotes or backslashes (those escaped inside)."""
    word = word.replace("%", "%%").replace("$", "$$")
    if re.search(r"[\s\"'\\]", word):
        return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return word


def console_script(
    argv0: str | None = None, scripts_dir: str | None = None, search_path: str | None = None
) -> Path:
    """The absolute path of this installation's ``iolens`` command.

    Args:
        argv0: the running program (``sys.argv[0]``), taken when it is the ``iolens`` command
            itself (run as the console script), made absolute without resolving links.
        scripts_dir: else ``iolens`` in this interpreter's scripts directory
            (``sysconfig.get_path("scripts")``: a virtual environment's ``bin/``).
        search_path: else the ``iolens`` found on this ``PATH`` (``$PATH``).

    Raises:
        ConfigError: none of them is an executable file named ``iolens``.
    """
    import shutil
    import sys
    import sysconfig

    from pipeline.errors import ConfigError

    argv0 = sys.argv[0] if argv0 is None else argv0
    scripts = sysconfig.get_path("scripts") if scripts_dir is None else scripts_dir
    candidates = [
        Path(os.path.abspath(argv0)) if Path(argv0).name == "iolens" else None,
        Path(scripts, "iolens"),
        shutil.which("iolens", path=search_path),
    ]
    for candidate in candidates:
        if candidate is not None and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return Path(os.path.abspath(candidate))
    raise ConfigError(
        f"cannot find the iolens command (not {argv0}, not in {scripts}, not on PATH): run "
        "`iolens service unit` with the iolens the service is to run, e.g. /opt/iolens/bin/iolens"
    )
