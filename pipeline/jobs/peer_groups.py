"""Peer groups of LUNs: which LUN-server attachments are compared with each other (seed 001).

Seed 001 (Kasick et al., section 4) compares "LUNs", meaning LUN-server attachments, within
peer groups of attachments that carry the same workload: the LUNs of one storage array seen
through the different file servers attached to it. A peer group therefore spans servers; the
attachments that are a LUN's primary path and those that are normally idle (non-primary) are
different groups, which is how a fault shows up "as observable loads in normally zero-valued
non-primary peer groups" (section 4.2.1).

A LUN's group comes from the first of these that names it:

1. ``peer.members``: group -> list of ``host:device``;
2. ``peer.storage_map``: a CSV file, one row per attachment (:func:`read_storage_map`)::

       host,device,array,lun,path
       fs001,dm-3,ddn07,L012,primary
       fs002,dm-3,ddn07,L012,secondary

   The attachments of one ``array`` form a group, split by ``path`` when that column has a
   value (group ``ddn07/primary``); ``lun`` is informational;
3. ``peer.groups``: ``host:device`` glob -> group, first match wins;
4. otherwise the host: one group per server, the fallback, with a warning (once) as soon as
   LUNs of more than one host are seen, since per-server groups are not the seed's peers.
"""

from __future__ import annotations

import csv
import fnmatch
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.errors import ConfigError
from pipeline.settings import PeerSettings

log = logging.getLogger(__name__)

MAP_COLUMNS = ("host", "device", "array")
"""Columns every storage map must have (``lun`` and ``path`` are optional)."""


def read_storage_map(path: Path) -> dict[str, str]:
    """The peer group of every attachment of a storage map CSV file.

    The first line that is not empty or a ``#`` comment names the columns; each other line is
    one LUN-server attachment. The group is ``array``, or ``array/path`` when ``path`` is given.
    Rows that name the same ``lun`` must name the same ``array``.

    Returns:
        ``"host:device"`` -> group name.

    Raises:
        ConfigError: unreadable file, missing column, empty value, a group name with ``:``, an
            attachment listed twice in different groups, or a LUN on two arrays (the message
            names file and line).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"peer.storage_map {path}: cannot read it ({err})") from None
    numbered = [
        (n, line)
        for n, line in enumerate(text.splitlines(), start=1)
        if line.strip() and not line.lstrip().startswith("#")
    ]
    if not numbered:
        raise ConfigError(f"peer.storage_map {path}: no header line; start with host,device,array")
    header_line, header_text = numbered[0]
    header = [c.strip() for c in next(csv.reader([header_text]))]
    missing = [c for c in MAP_COLUMNS if c not in header]
    if missing:
        raise ConfigError(
            f"peer.storage_map {path} line {header_line}: no column {', '.join(missing)}; "
            "the header names the columns host,device,array (lun and path are optional)"
        )
    rows = _MapRows(path)
    for n, line in numbered[1:]:
        rows.add(n, dict(zip(header, (v.strip() for v in next(csv.reader([line]))), strict=False)))
    return rows.groups


@dataclass
class _MapRows:
    """The rows of a storage map read so far, checked against each other."""

    path: Path
    groups: dict[str, str] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)
    arrays: dict[str, tuple[str, int]] = field(default_factory=dict)

    def add(self, n: int, values: Mapping[str, str]) -> None:
        """Row ``n`` (1-based line number) as ``column -> value``.

        Raises:
            ConfigError: see :func:`read_storage_map`.
        """
        path = self.path
        empty = [c for c in MAP_COLUMNS if not values.get(c)]
        if empty:
            raise ConfigError(
                f"peer.storage_map {path} line {n}: empty {', '.join(empty)}; "
                "every row needs host, device and array"
            )
        array, lun_id = values["array"], values.get("lun", "")
        group = array + (f"/{values['path']}" if values.get("path") else "")
        if ":" in group:
            raise ConfigError(
                f"peer.storage_map {path} line {n}: group name {group!r} contains ':'; "
                "use names without ':'"
            )
        lun = f"{values['host']}:{values['device']}"
        if self.groups.get(lun, group) != group:
            raise ConfigError(
                f"peer.storage_map {path} line {n}: {lun} is already in group "
                f"{self.groups[lun]} (line {self.lines[lun]}); list each attachment once"
            )
        first_array, first_line = self.arrays.setdefault(lun_id, (array, n))
        if lun_id and first_array != array:
            raise ConfigError(
                f"peer.storage_map {path} line {n}: LUN {lun_id} is on array {first_array} "
                f"at line {first_line}; a LUN has one array: correct one of the rows"
            )
        self.groups[lun], self.lines[lun] = group, n


@dataclass
class PeerGroups:
    """Assigns LUNs to peer groups (module docstring), warning once about the fallback.

    Args:
        exact: ``"host:device"`` -> group (``peer.members``, then ``peer.storage_map``).
        patterns: ``"host:device"`` glob -> group (``peer.groups``), first match wins.
    """

    exact: Mapping[str, str] = field(default_factory=dict)
    patterns: Mapping[str, str] = field(default_factory=dict)
    _hosts: set[str] = field(default_factory=set, repr=False)
    _fallback: str | None = field(default=None, repr=False)
    _warned: bool = field(default=False, repr=False)

    @classmethod
    def from_settings(cls, peer: PeerSettings) -> PeerGroups:
        """The groups of the ``peer`` settings (reads ``peer.storage_map``).

        Raises:
            ConfigError: a bad storage map (:func:`read_storage_map`).
        """
        exact = read_storage_map(Path(peer.storage_map)) if peer.storage_map else {}
        for group, luns in peer.members.items():
            exact.update(dict.fromkeys(luns, group))
        return cls(exact, dict(peer.groups))

    def of(self, host: str, device: str) -> str:
        """The peer group of LUN ``host``/``device``: the module docstring's rules."""
        self._hosts.add(host)
        name = f"{host}:{device}"
        group = self.exact.get(name)
        if group is None:
            group = next(
                (g for p, g in self.patterns.items() if fnmatch.fnmatchcase(name, p)), None
            )
        if group is None:
            group = host
            self._fallback = self._fallback or f"{host}/{device}"
        if self._fallback is not None and len(self._hosts) > 1 and not self._warned:
            self._warned = True
            log.warning(
                "peer groups: LUN %s is in no peer.members, peer.storage_map or peer.groups "
                "entry, so it is only compared with LUNs of its own server, while LUNs of "
                "several servers are seen; peers are LUNs with the same workload on different "
                "servers: name them in peer.members, peer.storage_map or peer.groups (offline: "
                "--groups, --storage-map)",
                self._fallback,
            )
        return group


def as_groups(groups: Mapping[str, str] | PeerGroups) -> PeerGroups:
    """``groups`` itself, or the assignment by the ``"host:device"`` globs of a mapping."""
    return groups if isinstance(groups, PeerGroups) else PeerGroups(patterns=dict(groups))
