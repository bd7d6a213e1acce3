"""Converting a whole sadc binary file (``saDD``, ``sadc -S DISK ...``) to sadf CSV.

sadc files store each disk by major:minor; sadf resolves the names from the devices of the
host it runs on (reference/sysstat.md 1.2). The conversion therefore runs here, in the shipper
on the recording host, and only its CSV travels on. A file recorded elsewhere still converts,
but its device names may be wrong: a warning says so when the file's hostname is not this
host's.

The output is what :func:`pipeline.parsers.sysstat.parse_sadf_csv` reads, e.g.::

    # hostname;interval;timestamp;DEV;tps;rkB/s;wkB/s;dkB/s;areq-sz;aqu-sz;await;%util
    vm;1;1795320863;vda;195.00;1092.00;102352.00;4.00;530.50;0.35;1.78;7.60
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Callable
from typing import Any

from pipeline.errors import ConfigError
from pipeline.parsers.errors import ParseError
from pipeline.parsers.sysstat import sadf_command

log = logging.getLogger(__name__)

SADF_TIMEOUT_S = 120.0
"""How long one conversion may take (a day of 1 s samples of a few dozen disks takes seconds)."""

RunFn = Callable[..., "subprocess.CompletedProcess[bytes]"]


def convert_sadc(
    path: str | os.PathLike[str],
    *,
    sadf: str = "sadf",
    pretty: bool = True,
    timeout_s: float = SADF_TIMEOUT_S,
    local_host: str | None = None,
    run: RunFn = subprocess.run,
) -> bytes:
    """Run :func:`~pipeline.parsers.sysstat.sadf_command` on a complete sadc file.

    sadf runs with ``LC_ALL=C`` (decimal points, not commas) and ``TZ=UTC``.

    Args:
        path: the sadc binary file; it must be complete (closed or stable).
        sadf: the sadf executable.
        pretty: pass sar's ``-p`` (``/dev/mapper`` names for device-mapper devices).
        timeout_s: limit for the sadf process.
        local_host: this host's nodename (default ``os.uname().nodename``), compared with the
            hostname in the output.
        run: ``subprocess.run`` (tests inject a fake).

    Returns:
        The CSV output of ``sadf -d -U FILE -- -d [-p]``, bytes.

    Raises:
        ConfigError: sadf is not installed.
        ParseError: sadf rejected the file (not a sadc file, a file of another sysstat version,
            truncated); the reason carries sadf's exit status and message.
        TimeoutError: sadf did not finish within ``timeout_s``.
    """
    name = os.fspath(path)
    argv = sadf_command(name, sadf=sadf, pretty=pretty)
    out = _run_sadf(run, argv, name, timeout_s)
    _warn_if_foreign(out, name, local_host if local_host is not None else os.uname().nodename)
    return out


def _run_sadf(run: RunFn, argv: list[str], name: str, timeout_s: float) -> bytes:
    """sadf's output (``argv[0]`` is sadf) for the file ``name``; raises as
    :func:`convert_sadc`."""
    env = {**os.environ, "LC_ALL": "C", "TZ": "UTC"}
    kwargs: dict[str, Any] = {"capture_output": True, "timeout": timeout_s, "env": env}
    try:
        done = run(argv, check=False, **kwargs)
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
