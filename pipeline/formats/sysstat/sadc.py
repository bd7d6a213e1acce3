"""Converting a whole sadc binary file (``saDD``, ``sadc -S DISK ...``) to sadf CSV.

sadc files store each disk by major:minor; sadf resolves the names from the devices of the
host it runs on (reference/sysstat.md 1.2). The conversion therefore runs here, in the shipper
on the recording host, and only its CSV travels on. A file recorded elsewhere still converts,
but its device names may be wrong: a warning says so when the file's hostname is not this
host's.

The output is what :func:`pipeline.formats.sysstat.decode.parse_sadf_csv` reads, e.g.::

    # hostname;interval;timestamp;DEV;tps;rkB/s;wkB/s;dkB/s;areq-sz;aqu-sz;await;%util
    vm;1;1795320863;vda;195.00;1092.00;102352.00;4.00;530.50;0.35;1.78;7.60
"""

from __future__ import annotations

import logging
import os
import subprocess
import tempfile
from pathlib import Path

from pipeline.errors import ConfigError
from pipeline.formats.sysstat.decode import sadf_command
from pipeline.formats.sysstat.sadc_versions import (
    OLD_FORMAT,
    RunFn,
    convert_format,
    newer_than_sadf,
)
from pipeline.parsers.errors import ParseError

log = logging.getLogger(__name__)

SADF_TIMEOUT_S = 120.0
"""How long one conversion may take (a day of 1 s samples of a few dozen disks takes seconds)."""


def convert_sadc(
    path: str | os.PathLike[str],
    *,
    sadf: str = "sadf",
    pretty: bool = True,
    timeout_s: float = SADF_TIMEOUT_S,
    local_host: str | None = None,
    run: RunFn = subprocess.run,
    work_dir: str | os.PathLike[str] | None = None,
) -> bytes:
    """Run :func:`~pipeline.formats.sysstat.decode.sadf_command` on a complete sadc file.

    sadf runs with ``LC_ALL=C`` (decimal points, not commas) and ``TZ=UTC``. A file of an
    earlier sysstat format is converted first with ``sadf -c`` into ``work_dir``
    (:mod:`pipeline.formats.sysstat.sadc_versions`), read, and the converted copy deleted.

    Args:
        path: the sadc binary file; it must be complete (closed or stable).
        sadf: the sadf executable.
        pretty: pass sar's ``-p`` (``/dev/mapper`` names for device-mapper devices).
        timeout_s: limit for the sadf process.
        local_host: this host's nodename (default ``os.uname().nodename``), compared with the
            hostname in the output.
        run: ``subprocess.run`` (tests inject a fake).
        work_dir: where ``sadf -c`` writes its conversion (default: a temporary directory).

    Returns:
        The CSV output of ``sadf -d -U FILE -- -d [-p]``, bytes.

    Raises:
        ConfigError: sadf is not installed.
        ParseError: sadf rejected the file (not a sadc file, truncated, without disk
            statistics), it was written by a newer sysstat than this host's sadf (the reason
            names both versions), its older format could not be converted, or sadf printed
            nothing for it; the reason carries sadf's exit status and message.
        TimeoutError: sadf did not finish within ``timeout_s``.
    """
    name = os.fspath(path)
    argv = sadf_command(name, sadf=sadf, pretty=pretty)
    try:
        out = _run_sadf(run, argv, name, timeout_s)
    except ParseError as err:
        newer = newer_than_sadf(name, sadf)
        if newer is not None:
            raise ParseError(name, 0, f"{newer} ({err.reason})") from None
        if OLD_FORMAT not in err.reason:
            raise ParseError(name, 0, err.reason + _hint(err.reason)) from None
        try:
            out = _converted(name, argv, work_dir, sadf=sadf, timeout_s=timeout_s, run=run)
        except ParseError as failed:
            raise ParseError(name, 0, f"{failed.reason} [{err.reason}]") from None
    _refuse_empty(out, name, sadf)
    _warn_if_foreign(out, name, local_host if local_host is not None else os.uname().nodename)
    return out


def _refuse_empty(out: bytes, name: str, sadf: str) -> None:
    """Never read a file sadf printed no row for as empty: say why.

    Raises:
        ParseError: no row (a newer sysstat wrote it, or it holds no record).
    """
    if any(line and not line.startswith(b"#") for line in out.splitlines()):
        return
    why = newer_than_sadf(name, sadf) or (
        "sadf printed nothing for it (no record after the file header: cut short, or not a "
        "file of disk statistics)"
    )
    raise ParseError(name, 0, why)


def _hint(reason: str) -> str:
    """What to do about a sadf message, where it is known."""
    if "Requested activities not available" in reason:
        return "; sadc records disk statistics only with -S DISK (SADC_OPTIONS in sysstat's config)"
    return ""


def _converted(
    name: str,
    argv: list[str],
    work_dir: str | os.PathLike[str] | None,
    *,
    sadf: str,
    timeout_s: float,
    run: RunFn,
) -> bytes:
    """sadf's CSV of ``name`` converted with ``sadf -c`` (into ``work_dir``, then deleted)."""
    env = {**os.environ, "LC_ALL": "C", "TZ": "UTC"}
    if work_dir is not None:
        Path(work_dir).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=work_dir) as tmp:
        new = convert_format(name, Path(tmp), sadf=sadf, timeout_s=timeout_s, run=run, env=env)
        log.info("%s: an earlier sysstat format, converted with sadf -c", name)
        try:
            return _run_sadf(
                run, [os.fspath(new) if a == name else a for a in argv], name, timeout_s
            )
        except ParseError as err:
            raise ParseError(name, 0, f"converted with sadf -c, then: {err.reason}") from None


def _run_sadf(run: RunFn, argv: list[str], name: str, timeout_s: float) -> bytes:
    """sadf's output (``argv[0]`` is sadf) for the file ``name``; raises as
    :func:`convert_sadc`."""
    env = {**os.environ, "LC_ALL": "C", "TZ": "UTC"}
    try:
        done = run(argv, check=False, capture_output=True, timeout=timeout_s, env=env)
    except FileNotFoundError:
        raise ConfigError(
            f"{argv[0]!r} not found: install sysstat (apt-get install sysstat) to convert {name}"
        ) from None
    except subprocess.TimeoutExpired:
        raise TimeoutError(f"sadf took more than {timeout_s:g} s converting {name}") from None
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip() or "(no message)"
        raise ParseError(
            name, 0, f"sadf exited with status {done.returncode} ({' '.join(argv)}): {message}"
        )
    out: bytes = done.stdout
    return out


def _warn_if_foreign(csv: bytes, name: str, local_host: str) -> None:
    """Log a warning when the file's first data row names another host than this one."""
    for line in csv.splitlines():
        if line and not line.startswith(b"#"):
            host = line.split(b";", 1)[0].decode("utf-8", "replace")
            if host != local_host:
                log.warning(
                    "%s was recorded on %s but converted on %s: device names come from this "
                    "host's devices and may be wrong; convert it on %s",
                    name,
                    host,
                    local_host,
                    host,
                )
            return
