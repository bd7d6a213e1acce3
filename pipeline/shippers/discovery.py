"""The files being read: discovery, identity, renames, replacement and retirement.

A path found in a drop (by the initial scan or a file event) is identified
(:func:`pipeline.shippers.identity.identify`: device + inode + fingerprint); a file seen before
keeps its tail, followed across renames; a new one gets a tail from its drop format's shipper
(:mod:`pipeline.formats.registry`), resumed from the registry, or adopted as the rotated copy of
a file read before (:mod:`pipeline.shippers.rotation`). A path that cannot be identified yet (no
complete first line) waits in :attr:`FileSet.unidentified`; a file gone or replaced is
*retired*: no longer read, but its lines in flight still get committed.

A file whose registry entry says its lines were delivered to another cluster than the one in
use (:meth:`~pipeline.shippers.registry.FileState.delivered_elsewhere`) is not read: it is noted
in :attr:`FileSet.elsewhere` for the caller to tell the user once. A file resumed from a
committed offset is noted in :attr:`FileSet.resumed` (reported as skipped when nothing new was
read of it).
"""

from __future__ import annotations

import errno
import logging
import sqlite3
from collections.abc import Mapping
from pathlib import Path

from pipeline.errors import ConfigError
from pipeline.settings import DropSettings, Settings
from pipeline.shippers.hosts import unrotated
from pipeline.shippers.identity import find_renamed, identify
from pipeline.shippers.interface import NewFile, Shipper, Tail
from pipeline.shippers.registry import FileState, Registry
from pipeline.shippers.rotation import adopt_rotated, renamed_while_away
from pipeline.shippers.unreadable import Unreadable
from pipeline.shippers.watcher import DropWatcher
from pipeline.sink.disk import DiskWatch, is_disk_full

log = logging.getLogger(__name__)


def default_drop(path: Path) -> DropSettings:
    """The drop of a file given outside any drop: an fio histogram log in its directory."""
    return DropSettings(type="fio-hist", path=str(path.parent))


class FileSet:
    """The tails of the files being read, by registry key, and the paths waiting to be.

    Args:
        settings: the configuration (drops, ``shipper.fingerprint_bytes``).
        registry: what was read of each file.
        shippers: drop type -> its shipper (:func:`pipeline.formats.registry.build_shippers`).
        disk: told when the registry has no room for a new file (it is tried again later).
    """

    def __init__(
        self,
        settings: Settings,
        registry: Registry,
        shippers: Mapping[str, Shipper],
        disk: DiskWatch | None = None,
    ) -> None:
        self.settings = settings
        self.registry = registry
        self.shippers = shippers
        self.disk = disk or DiskWatch(registry.path.parent)
        self.unregistered: set[str] = set()
        """Paths of :attr:`unidentified` that the registry had no room to register (a full
        disk)."""
        self.tails: dict[str, Tail] = {}
        self.retired: dict[str, Tail] = {}
        self.drops: dict[str, DropSettings] = {}
        self.by_path: dict[str, str] = {}
        self.unidentified: dict[str, DropSettings] = {}
        """Paths with no complete first line yet, with their drops."""
        self._refused: set[str] = set()
        self.truncated: dict[str, FileState] = {}
        """Path -> the state of the file there before it was truncated (see
        :func:`~pipeline.shippers.rotation.adopt_rotated`)."""
        self.elsewhere: dict[str, str] = {}
        """Registry key -> the other cluster its lines were delivered to (not read)."""
        self.resumed: set[str] = set()
        """Registry keys of the files opened at a committed offset (delivered before)."""
        self.unreadable = Unreadable()
        """The files that cannot be read now (permission denied, stale handle): tried again."""

    def find(self, key: str) -> Tail | None:
        """The tail of file ``key``, read or retired."""
        return self.tails.get(key) or self.retired.get(key)

    def identify(self, p: str, whole_file: bool = False) -> str | None:
        """The registry key of the file at ``p`` (None: no complete first line yet).

        Raises:
            OSError: it cannot be read (FileNotFoundError: it is gone).
        """
        ident = identify(
            p,
            self.settings.shipper.fingerprint_bytes,
            whole_file=whole_file or p.endswith(".gz"),
        )
        return None if ident is None else ident.key

    def discover(self, path: Path, drop: DropSettings | None) -> Tail | None:
        """Start (or resume) tailing ``path``.

        Returns None while it cannot be identified yet (no complete first line), when it is gone,
        hidden (``.name``: rsync and editors write such temporary files and rename them when
        done), or was quarantined before.
        """
        if path.name.startswith("."):
            return None
        drop = drop or default_drop(path)
        if not self._inside(path, drop):
            return None
        key = self._key_of(str(path), drop)
        if key is None:
            return None
        try:
            tail = self._resume(key, path, drop)
        except sqlite3.OperationalError as err:
            if not is_disk_full(err):
                raise
            self.disk.full("new files", self.registry.path, f"new files ({path} first) to read")
            self.unidentified[str(path)] = drop  # tried again, as a file not identified yet
            self.unregistered.add(str(path))
            return None
        self.unregistered.discard(str(path))
        if not self.unregistered:
            self.disk.ok("new files")
        return tail

    def _resume(self, key: str, path: Path, drop: DropSettings) -> Tail | None:
        """The tail of file ``key`` at ``path``: the one being read (followed when renamed) or
        a new one (see :meth:`_open`).

        Raises:
            sqlite3.OperationalError: the registry cannot be written (a full disk).
        """
        self._replaced(str(path), key)
        tail = self.tails.get(key)
        if tail is not None:
            if tail.path != str(path):
                self.moved(tail, str(path))
            return tail
        return self._open(key, path, drop)

    def _key_of(self, p: str, drop: DropSettings) -> str | None:
        """The key of the file at ``p``; None (noted in :attr:`unidentified` unless it is gone)
        when it cannot be identified now."""
        try:
            key = self.identify(p, whole_file=self.shippers[drop.type].whole_file)
        except FileNotFoundError:
            self.unidentified.pop(p, None)
            return None
        except OSError as err:
            self.unreadable.report(p, err)
            self.unidentified[p] = drop
            return None
        self.unreadable.readable(p)
        if key is None:
            self.unidentified[p] = drop
            return None
        self.unidentified.pop(p, None)
        return key

    def _replaced(self, p: str, key: str) -> None:
        """Retire the file that was at ``p`` if ``key`` took its place (and it is not found
        renamed next to it)."""
        previous = self.by_path.get(p)
        if previous is not None and previous != key and not self.follow(previous):
            self.let_go_replaced(previous, key)

    def _open(self, key: str, path: Path, drop: DropSettings) -> Tail | None:
        """A new tail on file ``key`` from its drop format's shipper; None when it was
        quarantined before or is not of the format."""
        state = self.registry.get(key)
        if state is not None and state.done:
            return None  # quarantined earlier: it stays in the dead-letter area
        if state is not None and state.delivered_elsewhere(self.registry.cluster):
            if key not in self.elsewhere:
                log.debug("%s was delivered to cluster %s: not read", path, state.cluster)
            self.elsewhere[key] = str(state.cluster)
            return None
        if state is not None and state.offset:
            self.resumed.add(key)
        shipper = self.shippers[drop.type]
        if state is None and shipper.rotated_copies:
            state = adopt_rotated(self.registry, self.truncated, key, path)
        named = unrotated(path)  # a rotated file is named as the file it was rotated from
        tail = shipper.open(NewFile(key, str(path), named, drop, state, self.registry))
        return None if tail is None else self._track(tail, drop)

    def moved(self, tail: Tail, path: str) -> None:
        """``tail``'s file is now at ``path`` (renamed): follow it there."""
        log.info("%s was renamed to %s", tail.path, path)
        self.registry.set_path(tail.key, path)
        if self.by_path.get(tail.path) == tail.key:
            del self.by_path[tail.path]
        tail.path = path
        self.by_path[path] = tail.key

    def follow(self, key: str) -> bool:
        """Find file ``key``, no longer at its path, under another name in the same directory
        (a rotation by rename to a name the drop's pattern may not match) and keep reading it
        there: the lines written before the rename are still read. False if it is not there."""
        tail = self.tails.get(key)
        if tail is None:
            return False
        found = find_renamed(key, Path(tail.path))
        if found is None or self.identify(str(found)) != key:
            return False
        self.moved(tail, str(found))
        tail.exhausted = False
        return True

    def _inside(self, path: Path, drop: DropSettings) -> bool:
        """Whether ``path`` really lies in its drop directory: a symbolic link (or a linked
        directory) that leads elsewhere is refused, once, with a warning, so a drop directory
        cannot be used to read files it does not hold."""
        try:
            real = path.resolve(strict=True)
        except (OSError, RuntimeError):
            return True  # gone, or a loop: identification reports it
        root = Path(drop.path).resolve()
        if real == root or root in real.parents:
            return True
        if str(path) not in self._refused:
            self._refused.add(str(path))
            log.warning("%s leads to %s, outside the drop directory %s: not read", path, real, root)
        return False

    def _track(self, tail: Tail, drop: DropSettings) -> Tail:
        self.tails[tail.key] = tail
        self.drops[tail.key] = drop
        self.by_path[tail.path] = tail.key
        self.retired.pop(tail.key, None)
        return tail

    def retire(self, key: str) -> None:
        """Stop reading a file (gone or replaced); its in-flight lines still get committed."""
        tail = self.tails.pop(key, None)
        if tail is None:
            return
        if self.by_path.get(tail.path) == key:
            del self.by_path[tail.path]
        self.retired[key] = tail

    def deleted(self, path: str) -> None:
        """The file at ``path`` was deleted: retire it, wait for it no more."""
        key = self.by_path.get(path)
        if key is not None:
            self.retire(key)
        self.unidentified.pop(path, None)
        self.unreadable.forget(path)

    def still_there(self, tail: Tail) -> bool:
        """Whether ``tail.path`` still holds the tail's file; if another file replaced it, that
        one is discovered (and read by the caller's next pass)."""
        drop = self.drops.get(tail.key)
        try:
            whole = drop is not None and self.shippers[drop.type].whole_file
            key = self.identify(tail.path, whole_file=whole)
        except FileNotFoundError:
            if self.follow(tail.key):
                return True
            log.info("%s is gone", tail.path)
            self.retire(tail.key)
            return False
        except OSError as err:
            self.unreadable.report(tail.path, err)
            return False
        return key == tail.key or self._taken(tail, key)

    def _taken(self, tail: Tail, key: str | None) -> bool:
        """``tail.path`` holds another file (``key``, None while unidentified): whether the
        tail's file was found renamed. Either way the other file waits in
        :attr:`unidentified`, to be opened by the caller's next pass."""
        old_path = tail.path
        if self.follow(tail.key):  # renamed, and another file took its name
            self.unidentified[old_path] = self.drops[tail.key]
            return True
        drop = self.drops.get(tail.key)
        self.let_go_replaced(tail.key, key)
        self.unidentified[tail.path] = drop or default_drop(Path(tail.path))  # the new file
        return False

    def let_go_replaced(self, old: str, new: str | None) -> None:
        """The path of file ``old`` holds another file now (``new``, None while it has no
        complete first line), and ``old`` is not found renamed in its directory: ``old`` is
        retired (its lines in flight still get committed); what it held after where it was
        read to is not read, as it is gone (deleted, or moved out of its directory)."""
        tail = self.tails.get(old)
        if tail is None:
            return
        inode = "?" if new is None else new.split(":")[1]
        log.warning(
            "%s was replaced by another file (inode %s): the new file is read from its start. "
            "The file read there before is no longer in its directory (deleted, or moved "
            "elsewhere): it was read to byte %s and whatever it held after that is not read",
            tail.path,
            inode,
            tail.offset,
        )
        self.retire(old)

    def truncated_now(self, tail: Tail) -> None:
        """``tail``'s file was truncated: read it again from the start (a copy of what it held
        may turn up: logrotate ``copytruncate``)."""
        log.warning("%s was truncated: reading it again from the start", tail.path)
        before = self.registry.get(tail.key)
        if before is not None and before.offset:
            self.truncated[tail.path] = before
        self.registry.reset(tail.key)
        tail.restart()

    def watcher(self, drop: DropSettings) -> DropWatcher:
        """A watcher of one drop directory.

        Raises:
            ConfigError: the directory does not exist (the message names ``drops[].path``).
        """
        shipper = self.settings.shipper
        pattern = drop.pattern or self.shippers[drop.type].pattern
        try:
            return DropWatcher(
                [Path(drop.path)], pattern, shipper.observer, shipper.poll_interval_s
            )
        except FileNotFoundError as err:
            raise ConfigError(err.strerror) from None

    def drop_files(self) -> list[tuple[Path, DropSettings]]:
        """The drops' files, and files read before that were renamed (rotated) since to names
        the drops' patterns do not match (see
        :func:`~pipeline.shippers.rotation.renamed_while_away`)."""
        drops = self.settings.drops
        files = [(p, drop) for drop in drops for p in self.watcher(drop).initial_scan()]
        scanned = {str(p) for p, _ in files}
        return files + renamed_while_away(self.registry, drops, scanned, self.identify)

    def tell_not_read(self) -> None:
        """At the end of a run: name the files that could not be read, and those with no
        complete first line yet; the next run tries them again."""
        failing = self.unreadable.failing
        for p in sorted(failing):
            log.warning(
                "%s could not be read in this run (%s): it was not read to its end; the next "
                "run tries it again from where it was read to",
                p,
                errno.errorcode.get(failing[p], str(failing[p])),
            )
        for p in sorted(set(self.unidentified) - set(failing)):
            if p in self.unregistered:
                log.warning(
                    "%s was not read: %s had no room for it (the state directory's disk is "
                    "full); the next run reads it",
                    p,
                    self.registry.path,
                )
            else:
                log.warning("%s has no complete first line yet; it was not read", p)
        self.unidentified.clear()
