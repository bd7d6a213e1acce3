"""Watching drop directories for new and growing input files.

watchdog's observer threads produce file-system events; a small handler turns those that concern
input files into immutable :class:`FileEvent` values on a :class:`queue.Queue`, and the shipper
drains the queue on its own thread (watchdog's own shape: producer thread -> queue -> handler).

``observer: native`` uses inotify (Linux); ``observer: polling`` compares periodic ``stat``
snapshots, which is required on NFS/GPFS/Lustre, where inotify does not see writes made by other
nodes. Events are hints: the shipper still stats and identifies files itself, and an
:meth:`DropWatcher.initial_scan` covers files that arrived while nothing was watching.

Directory events are not reported; a file moved within the watched tree is one ``moved`` event.
The native observer also reports ``closed`` when a file opened for writing is closed, a hint that
a whole-file input is complete.

A drop directory deleted (or moved away) while watched stops its observer's watch (watchdog
stops the emitter of a root that is gone); :meth:`DropWatcher.drain` notices it (the path no
longer holds the directory it watched: device and inode), says so once, and when a directory is
at that path again watches it anew and reports its files as ``created``, so they are read.
"""

from __future__ import annotations

import errno
import logging
import os
import queue
import stat as statmod
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Literal

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.polling import PollingObserverVFS

log = logging.getLogger(__name__)

EventKind = Literal["created", "modified", "moved", "deleted", "closed"]
ObserverKind = Literal["native", "polling"]
WalkFn = Callable[[str], Iterable[tuple[str, list[str], list[str]]]]

_KINDS: dict[str, EventKind] = {
    "created": "created",
    "modified": "modified",
    "moved": "moved",
    "deleted": "deleted",
    "closed": "closed",
}


@dataclass(frozen=True)
class FileEvent:
    """Something happened to an input file.

    Attributes:
        path: the file (for ``moved``, its old path).
        kind: ``created``, ``modified``, ``moved``, ``deleted``, or ``closed`` (native observer
            only: a file opened for writing was closed).
        dest: the new path of a ``moved`` file, else None.
    """

    path: Path
    kind: EventKind
    dest: Path | None = None


def to_file_event(event: FileSystemEvent, pattern: str) -> FileEvent | None:
    """The :class:`FileEvent` for a watchdog event, or None if it does not concern an input file.

    Pure. Directory events, kinds other than those of :class:`FileEvent` (``opened``,
    ``closed_no_write``, ``attrib``) and files whose base name does not match ``pattern``
    (``fnmatch``, case-sensitive) give None; a move counts if either name matches.
    """
    kind = _KINDS.get(event.event_type)
    if event.is_directory or kind is None:
        return None
    src = Path(os.fsdecode(event.src_path))
    dest = Path(os.fsdecode(event.dest_path)) if kind == "moved" else None
    names = [src.name] if dest is None else [src.name, dest.name]
    if not any(fnmatchcase(name, pattern) for name in names):
        return None
    return FileEvent(path=src, kind=kind, dest=dest)


def stat_is_dir(st: os.stat_result) -> bool:
    """Whether ``st`` is the ``stat`` of a directory."""
    return statmod.S_ISDIR(st.st_mode)


class _QueueHandler(FileSystemEventHandler):
    """Runs on watchdog's dispatcher thread: converts and enqueues, nothing else."""

    def __init__(self, pattern: str, events: queue.Queue[FileEvent]) -> None:
        super().__init__()
        self._pattern = pattern
        self._events = events

    def on_any_event(self, event: FileSystemEvent) -> None:
        file_event = to_file_event(event, self._pattern)
        if file_event is not None:
            self._events.put(file_event)


class DropWatcher:
    """Watch drop directories (recursively) for files whose base name matches ``pattern``.

    Args:
        dirs: the drop directories (``drops[].path``); each must exist.
        pattern: glob on base names (``drops[].pattern``), e.g. ``*_clat_hist.*.log*``.
        observer: ``native`` (inotify) or ``polling`` (``shipper.observer``).
        poll_interval_s: scan period of the polling observer (``shipper.poll_interval_s``).
        walk: ``os.walk`` or a fake, for :meth:`initial_scan`.
        stat: ``os.stat`` or a fake, for the polling observer's snapshots.
        listdir: ``os.scandir`` or a fake, for the polling observer's snapshots.

    Raises:
        FileNotFoundError: a drop directory does not exist (the message names it and the config
            key ``drops[].path``).
    """

    def __init__(
        self,
        dirs: Sequence[Path],
        pattern: str,
        observer: ObserverKind = "native",
        poll_interval_s: float = 1.0,
        *,
        walk: WalkFn = os.walk,
        stat: Callable[[str], os.stat_result] = os.stat,
        listdir: Callable[[str | None], Iterator[os.DirEntry[str]]] = os.scandir,
    ) -> None:
        for d in dirs:
            if not Path(d).is_dir():
                raise FileNotFoundError(
                    errno.ENOENT,
                    f"drop directory {d} does not exist or is not a directory; create it or fix "
                    "drops[].path in the configuration",
                    str(d),
                )
        if observer not in ("native", "polling"):
            raise ValueError(f"observer must be 'native' or 'polling', got {observer!r}")
        self.dirs = tuple(Path(d) for d in dirs)
        self.pattern = pattern
        self.observer_kind: ObserverKind = observer
        self.poll_interval_s = poll_interval_s
        self._walk = walk
        self._stat = stat
        self._listdir = listdir
        self._events: queue.Queue[FileEvent] = queue.Queue()
        self._observer: Any = None
        self._handler: _QueueHandler | None = None
        self._watches: dict[Path, tuple[Any, tuple[int, int] | None]] = {}
        """Drop directory -> its watch and the (device, inode) of the directory watched
        (None: it was gone, nothing is watched there)."""

    def initial_scan(self) -> list[Path]:
        """Existing files under the drop directories whose base name matches, sorted, recursive."""
        return sorted(p for d in self.dirs for p in self._scan(d))

    def _scan(self, d: Path) -> set[Path]:
        """The files under ``d`` whose base name matches."""
        found: set[Path] = set()
        for root, _subdirs, files in self._walk(str(d)):
            found.update(Path(root, name) for name in files if fnmatchcase(name, self.pattern))
        return found

    def _make_observer(self) -> Any:
        if self.observer_kind == "polling":
            return PollingObserverVFS(
                self._stat, self._listdir, polling_interval=self.poll_interval_s
            )
        return Observer()

    def start(self) -> None:
        """Start the observer thread: one recursive watch per drop directory.

        Raises:
            RuntimeError: already started.
            OSError: the native observer cannot watch (e.g. the inotify watch limit); the error
                carries a note suggesting ``shipper.observer: polling``.
        """
        if self._observer is not None:
            raise RuntimeError("DropWatcher already started")
        obs = self._make_observer()
        self._handler = _QueueHandler(self.pattern, self._events)
        try:
            for d in self.dirs:
                self._watches[d] = (
                    obs.schedule(self._handler, str(d), recursive=True),
                    self._ident(d),
                )
            obs.start()
        except OSError as err:
            err.add_note(
                "the native observer (inotify) could not watch the drop directories; "
                "set shipper.observer: polling, or raise fs.inotify.max_user_watches"
            )
            raise
        self._observer = obs
        log.info(
            "watching %s for %s with the %s observer",
            ", ".join(str(d) for d in self.dirs),
            self.pattern,
            self.observer_kind,
        )

    def stop(self) -> None:
        """Stop the observer and join its threads. Does nothing if not started."""
        obs, self._observer = self._observer, None
        if obs is not None:
            obs.stop()
            obs.join()

    def drain(self, timeout_s: float) -> list[FileEvent]:
        """Wait up to ``timeout_s`` seconds for an event, then take all queued events, in order;
        with ``created`` events for the files of a drop directory that is back after it was
        deleted (see :meth:`rewatch`).

        Returns:
            The events; empty if none arrived in time.
        """
        events = self.rewatch()
        try:
            events.append(self._events.get(timeout=timeout_s))
        except queue.Empty:
            return events
        while True:
            try:
                events.append(self._events.get_nowait())
            except queue.Empty:
                return events

    def _ident(self, d: Path) -> tuple[int, int] | None:
        """(device, inode) of the directory at ``d``; None when there is none."""
        try:
            st = self._stat(str(d))
        except OSError:
            return None
        return (st.st_dev, st.st_ino) if stat_is_dir(st) else None

    def rewatch(self) -> list[FileEvent]:
        """Check that each drop directory is still the one watched: one deleted or moved away
        is said once (its watch stopped with it); one there again (recreated) is watched anew
        and its files are returned as ``created`` events. Does nothing before :meth:`start`."""
        found: list[FileEvent] = []
        if self._observer is None or self._handler is None:
            return found
        for d, (watch, was) in list(self._watches.items()):
            now = self._ident(d)
            if now == was:
                continue
            if was is not None:
                log.warning(
                    "drop directory %s was deleted or moved away: its files are read no more; "
                    "it is watched for, and read again once a directory is there (create it "
                    "again, or fix drops[].path)",
                    d,
                )
            if watch is not None:
                self._observer.unschedule(watch)
            if now is None:
                self._watches[d] = (None, None)
                continue
            self._watches[d] = (self._observer.schedule(self._handler, str(d), recursive=True), now)
            files = [FileEvent(p, "created") for p in self._scan(d)]
            log.warning(
                "drop directory %s is there again: watching it again; %s files found there",
                d,
                len(files),
            )
            found += files
        return found

    def __enter__(self) -> DropWatcher:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
