"""Which host and fio job a dropped file belongs to, from its name and place.

fio names histogram logs ``<prefix>_clat_hist.<job>.log`` (``write_hist_log=<prefix>``, one log per
job/thread numbered from 1). Benchmark harnesses such as CBT collect them from many clients and
append the client's host name, ``<prefix>_clat_hist.<job>.log.<host>`` (seed 000 merges such
per-thread, per-host logs); either form may be gzip-compressed (``… .gz``). Examples:

    randrw_clat_hist.3.log                 prefix randrw, job 3, no host in the name
    randrw_clat_hist.3.log.node07          host node07
    randrw_clat_hist.3.log.node07.gz       host node07 (compressed)
    randrw_clat_hist.3.log.gz              no host in the name (compressed)

A copy left by logrotate keeps its file's name plus a rotation suffix (``.1``, ``.2.gz``,
``-20261122`` with ``dateext``); :func:`unrotated` takes it off, so the copy is named (host, job,
document ids) as the file it was rotated from. A host name in a log name is therefore never all
digits (``x_clat_hist.1.log.1`` is the first rotation of ``x_clat_hist.1.log``).
"""

from __future__ import annotations

import re
from pathlib import Path

_FIO_NAME = re.compile(r"^(?P<prefix>.+)_clat_hist\.(?P<job>\d+)\.log(?:\.(?P<host>.+))?$")


_ROTATED = re.compile(
    r"^(?P<stem>.+?)"
    r"(?:\.\d{1,4}|-\d{8}(?:\d{2}){0,3}|-\d{4}-\d{2}-\d{2}|-\d{10})"
    r"(?P<z>\.(?:gz|bz2|xz|zst))?$"
)
"""A rotation suffix as logrotate writes it: ``.N`` (the default), ``-%Y%m%d[%H[%M[%S]]]``
(``dateext`` with the default ``dateformat`` or an hourly one), ``-%Y-%m-%d`` or ``-%s``,
each optionally followed by a compression extension (``compress``, ``compressext``)."""


def unrotated(path: Path) -> Path:
    """``path`` without a logrotate rotation suffix, keeping a compression extension:
    ``server.jsonl.1`` -> ``server.jsonl``, ``x_clat_hist.1.log.2.gz`` -> ``x_clat_hist.1.log.gz``,
    ``server.jsonl-20261122`` -> ``server.jsonl``; any other path is returned as it is, and
    so is a name whose ``.N`` follows another number (an IPv4 address as a host suffix)."""
    m = _ROTATED.match(path.name)
    if m is None or _DOTTED_NUMBER.search(m.group("stem")):
        return path  # e.g. a host suffix that is an IPv4 address: x_clat_hist.1.log.10.0.0.17
    return path.with_name(m.group("stem") + (m.group("z") or ""))


_DOTTED_NUMBER = re.compile(r"\.\d+$")


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
