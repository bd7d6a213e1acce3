"""The one interface every drop format's shipper implements.

A *tail* is the read state of one file (:class:`Tail`); a *shipper* (:class:`Shipper`) knows one
drop format: how to open a tail for a newly found file, and what the format does besides reading
lines (hand whole files to a worker pool first, let a quiet file go of what it holds, save state
on close). The main job reads every format the same way through these two; adding a format is
adding a module that subclasses :class:`Shipper`, and a line in
:data:`pipeline.formats.registry.FORMATS`.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol

from pipeline.reducers.darshan_job import JobAnalysis
from pipeline.reducers.io_diagnosis import Evidence
from pipeline.settings import DropSettings, Settings
from pipeline.shippers.registry import FileState, Registry
from pipeline.shippers.results import LineResult, Released
from pipeline.shippers.tailer import TailChunk
from pipeline.sink.documents import DocContext


class Tail(Protocol):
    """Read state of one file: where it is read to, and how its lines become documents.

    Attributes:
        key: registry key of the file (:func:`pipeline.shippers.identity.identify`).
        path: its current path.
        line_no: lines read so far.
        offset: where the next read starts (bytes; in the decompressed stream of a ``.gz``).
        exhausted: a file read whole (compressed, binary) was read to its end; it is read again
            only when a file event says it changed.
    """

    key: str
    path: str
    line_no: int
    offset: int
    exhausted: bool

    @property
    def compressed(self) -> bool:
        """Read whole once complete, never tailed."""
        ...

    def read(self, max_bytes: int) -> TailChunk:
        """The next complete lines (about ``max_bytes``)."""
        ...

    def process(self, chunk: TailChunk, ctx: DocContext, created_ms: float) -> Iterator[LineResult]:
        """What each line of ``chunk`` produced, advancing the tail."""
        ...

    def resume(self, offset: int, line_no: int, cursor: str | None) -> None:
        """Continue after a committed line, with the cursor stored with it."""
        ...

    def restart(self) -> None:
        """Start over at byte 0 after a truncation."""
        ...

    def take_snapshot(self, end_offset: int) -> str | None:
        """Pop the cursor stored for the line ending at ``end_offset``."""
        ...


@dataclass
class ShipContext:
    """What the shippers get from the job that runs them.

    Attributes:
        settings: the configuration.
        state_dir: the state directory (workload models are kept under it).
        hostname: ``host.name`` of files whose name and drop give none.
        clock: wall-clock seconds.
        evidence: server-side evidence for a low-bandwidth Darshan job's diagnosis.
        registry: what was read of each file.
        doc_ctx: the documents' namespace (documents made without new lines).
        once: whole-file inputs are complete as found (``iolens run --once``): no wait for them
            to be stable. Read when a file is opened.
        monotonic: monotonic seconds, for how long a file has been quiet or unchanged.
    """

    settings: Settings
    state_dir: Path
    hostname: str
    clock: Callable[[], float]
    evidence: Callable[[JobAnalysis], Evidence]
    registry: Registry
    doc_ctx: DocContext
    once: bool = False
    monotonic: Callable[[], float] = time.monotonic


@dataclass(frozen=True)
class NewFile:
    """A file identified for the first time in this process, to open a tail on.

    Attributes:
        key: its registry key; path: where it is.
        named: the name it is known by (without a rotation suffix:
            :func:`pipeline.shippers.hosts.unrotated`).
        drop: the drop it was found in.
        state: its registry entry, None when it was never seen.
        registry: the registry, to record it in.
    """

    key: str
    path: str
    named: Path
    drop: DropSettings
    state: FileState | None
    registry: Registry

    def register(self, anchor_ms: Callable[[], int] | None = None) -> FileState:
        """The file's registry entry: created when new (with the run start ``anchor_ms()`` of a
        job-relative log), its path updated when it moved."""
        if self.state is None:
            anchor = anchor_ms() if anchor_ms is not None else None
            return self.registry.upsert_new(self.key, self.path, anchor)
        if self.state.path != self.path:
            self.registry.set_path(self.key, self.path)
        return self.state


@dataclass(frozen=True)
class Idled:
    """What a quiet file let go of (:meth:`Shipper.idle`); ``key`` None: documents of no file
    (a workload model's snapshot)."""

    key: str | None
    released: Released


class Shipper(ABC):
    """How one drop format is shipped.

    Args:
        ctx: what the job gives its shippers.
    """

    pattern: ClassVar[str] = "*"
    """Default glob of the file names read in a drop (``drops[].pattern`` overrides it)."""

    writes: ClassVar[tuple[str, ...]] = ()
    """The data streams its documents go to, without the namespace (``metrics-fio.histogram``)."""

    whole_file: ClassVar[bool] = False
    """Files are read whole (binary), so any non-empty head identifies them."""

    final_line: ClassVar[bool] = False
    """Files are exports: at the end of ``iolens run --once`` a last line without a line end is
    a line (a file written without a final newline), not an incomplete one."""

    rotated_copies: ClassVar[bool] = True
    """Files are logs that logrotate may copy (``copytruncate``): a new file may continue one
    read before (:func:`pipeline.shippers.rotation.adopt_rotated`)."""

    def __init__(self, ctx: ShipContext) -> None:
        self.ctx = ctx

    @abstractmethod
    def open(self, file: NewFile) -> Tail | None:
        """A tail on ``file``, resumed from its registry entry (registered now when new); None
        when the file is not of this format after all (skipped with a warning)."""

    def prefetch(self, tail: Tail) -> None:  # noqa: B027 (a hook: most formats need none)
        """Before a batch of files is read: start work that can run beside the reading."""

    def ship(
        self, tail: Tail, chunk: TailChunk, ctx: DocContext, now_ms: float
    ) -> Iterator[LineResult]:
        """What each line of ``chunk`` produced (``now_ms``: wall-clock ms, the documents'
        creation time)."""
        return tail.process(chunk, ctx, now_ms)

    def idle(self, tails: Sequence[Tail], now_s: float, final: bool) -> Iterator[Idled]:
        """Let ``tails`` (this format's open files) go of what they hold while no line comes;
        ``final``: the run ends."""
        return iter(())

    def close(self) -> None:  # noqa: B027 (a hook: most formats need none)
        """Save state and stop workers (the job is closing)."""
