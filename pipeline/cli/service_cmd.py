"""``iolens service unit`` prints the systemd unit that runs ``iolens run`` as a system service,
its ``ExecStart=`` naming this installation's ``iolens`` command by its absolute path (the
virtual environment's ``bin/iolens`` when iolens is installed in one):

    iolens service unit > /etc/systemd/system/iolens.service
    systemctl daemon-reload && systemctl enable --now iolens

The service runs as the system user ``iolens`` (``--user NAME``: another one), reads
``/etc/iolens/pipeline.yaml`` (with the global ``--config FILE``: that file, made absolute),
keeps its state in ``/var/lib/iolens`` and takes its credentials from the environment file
``/etc/iolens/iolens.env``, never from the command line. ``systemctl stop`` drains: what was
read is delivered and committed before iolens exits, for at most ``sink.drain_timeout_s``
(then it exits with 75; what was not acknowledged is read again at the next start).
``TimeoutStopSec=`` is that plus 30 s, taken from the ``--config`` file (the defaults without
one): print the unit again after changing it. Installing, credentials, drop directories owned
by other users and what the hardening forbids: docs/operations/service.md.
"""

from __future__ import annotations

import argparse
import math
import os
import re
from pathlib import Path

from pipeline.cli.subcommand import Subparsers, add_actions, add_command

SERVICE_CONFIG = Path("/etc/iolens/pipeline.yaml")
"""The configuration the service reads unless ``--config`` names another."""

STOP_MARGIN_S = 30.0
"""What ``TimeoutStopSec=`` gives beyond ``sink.drain_timeout_s``: for the signal to be handled
and the process to exit once the drain's deadline passed."""

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
    """Print the unit; 0, or 2 (a ``ConfigError``) when the ``iolens`` command is not found or
    the ``--config`` file cannot be read or is invalid."""
    from pipeline.assets import required
    from pipeline.settings import load_settings

    template = required("systemd", "iolens.service").read_text(encoding="utf-8")
    config = Path(os.path.abspath(args.config)) if args.config else None
    # the service's configuration, without the environment's credentials (none is in the unit)
    drain_s = load_settings(config, env={}).sink.drain_timeout_s
    unit = render_unit(
        template, console_script(), config or SERVICE_CONFIG, args.user, stop_timeout_s(drain_s)
    )
    print(unit, end="")
    return 0


def stop_timeout_s(drain_timeout_s: float) -> int:
    """``TimeoutStopSec=`` in whole seconds for a drain of at most ``drain_timeout_s``: that
    plus :data:`STOP_MARGIN_S`, rounded up."""
    return math.ceil(drain_timeout_s + STOP_MARGIN_S)


def render_unit(template: str, iolens: Path, config: Path, user: str, timeout_stop_s: int) -> str:
    """The unit ``template`` with its placeholders filled in.

    Args:
        template: the text of ``pipeline/assets/systemd/iolens.service``.
        iolens: absolute path of the ``iolens`` command (``@IOLENS@``).
        config: absolute path of the configuration (``@CONFIG@``).
        user: the service's user and group (``@USER@``), checked by :func:`user_name`.
        timeout_stop_s: seconds systemd waits for the stop (``@TIMEOUT_STOP@``), from
            :func:`stop_timeout_s`.

    Returns:
        The unit, the paths quoted for a systemd command line (:func:`unit_word`).

    Raises:
        ValueError: a path is relative, or the stop timeout is not a positive number.
    """
    for path in (iolens, config):
        if not path.is_absolute():
            raise ValueError(f"{path}: the unit needs an absolute path")
    if timeout_stop_s <= 0:
        raise ValueError(f"the stop timeout must be positive, not {timeout_stop_s}")
    return (
        template.replace("@IOLENS@", unit_word(str(iolens)))
        .replace("@CONFIG@", unit_word(str(config)))
        .replace("@USER@", user)
        .replace("@TIMEOUT_STOP@", f"{timeout_stop_s}s")
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
