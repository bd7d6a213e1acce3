"""Which host and fio job a dropped file belongs to, from its name and place.

fio names histogram logs ``<prefix>_clat_hist.<job>.log`` (``write_hist_log=<prefix>``, one log per
job/thread numbered from 1). Benchmark harnesses such as CBT collect them from many clients and
append the client's host name, ``<prefix>_clat_hist.<job>.log.<host>`` (seed 000 merges such
per-thread, per-host logs); either form may be gzip-compressed (``… .gz``). Examples:

    randrw_clat_hist.3.log                 prefix randrw, job 3, no host in the name
    randrw_clat_hist.3.log.node07          host node07
    randrw_clat_hist.3.log.node07.gz       host node07 (compressed)
    randrw_clat_hist.3.log.gz              no host in the name (compressed)
"""

from __future__ import annotations

import re
from pathlib import Path

_FIO_NAME = re.compile(r"^(?P<prefix>.+)_clat_hist\.(?P<job>\d+)\.log(?:\.(?P<host>.+))?$")


def _fio_match(path: Path) -> re.Match[str] | None:
    name = path.name
    if name.endswith(".gz"):
        name = name[: -len(".gz")]
    return _FIO_NAME.match(name)


def _fio_match_or_raise(path: Path) -> re.Match[str]:
    m = _fio_match(path)
    if m is None:
        raise ValueError(
            f"{path.name!r} is not an fio histogram log name "
            "(expected <prefix>_clat_hist.<job>.log[.<host>][.gz], as written by write_hist_log)"
        )
    return m


def fio_host_suffix(path: Path) -> str | None:
    """The host name appended to an fio log name (``x_clat_hist.1.log.node07[.gz]``), else None."""
    m = _fio_match(path)
    return None if m is None else m.group("host")


def fio_job_for(path: Path) -> str:
    """The fio job number in a histogram log name: ``randrw_clat_hist.3.log`` -> ``"3"``.

    Raises:
        ValueError: the name is not ``<prefix>_clat_hist.<job>.log[.<host>][.gz]``.
    """
    return _fio_match_or_raise(path).group("job")


def fio_prefix_for(path: Path) -> str:
    """The ``write_hist_log`` prefix in a log name: ``randrw_clat_hist.3.log`` -> ``randrw``.

    Raises:
        ValueError: the name is not ``<prefix>_clat_hist.<job>.log[.<host>][.gz]``.
    """
    return _fio_match_or_raise(path).group("prefix")


def host_for(path: Path, drop_dir: Path, configured: str | None, default: str) -> str:
    """The ``host.name`` of a file dropped under ``drop_dir``.

    In order: ``configured`` (``drops[].host``) if set; the host suffix of an fio log name
    (``x_clat_hist.1.log.node07``); the first sub-directory of the path below the drop directory
    (``<drop>/node07/x_clat_hist.1.log`` -> ``node07``); ``default`` (this machine's name).

    Raises:
        ValueError: ``path`` is not below ``drop_dir`` (compared as given, not resolved).
    """
    if configured:
        return configured
    suffix = fio_host_suffix(path)
    if suffix:
        return suffix
    try:
        parts = path.relative_to(drop_dir).parts
    except ValueError:
        raise ValueError(f"{path} is not inside the drop directory {drop_dir}") from None
    if len(parts) > 1:
        return parts[0]
    return default
