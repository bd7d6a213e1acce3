"""Reading and analysing Darshan logs in worker processes that live as long as the shipper:
``import darshan`` alone costs about half a second (reference/darshan-iominer.md 3).

Files named ``*.txt`` (or starting with ``#``) are ``darshan-parser`` text dumps
(:func:`pipeline.formats.darshan.decode.parse_darshan_text`); everything else goes to pydarshan.
"""

from __future__ import annotations

import dataclasses
import logging
import multiprocessing
import os
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import orjson

from pipeline.formats.darshan.decode import parse_darshan_text
from pipeline.formats.darshan.read import read_darshan
from pipeline.parsers.errors import ParseError
from pipeline.reducers.darshan_job import JobAnalysis, analyze

log = logging.getLogger(__name__)


def is_text_dump(path: str) -> bool:
    """Whether ``path`` holds ``darshan-parser`` text (by name ``*.txt``, or a leading ``#``)."""
    if path.endswith(".txt"):
        return True
    try:
        with open(path, "rb") as fh:
            return fh.read(1) == b"#"
    except OSError:
        return False


def analyze_path(path: str) -> JobAnalysis:
    """Read and analyse one log (binary or text); the per-record tables, the file names and
    the Lustre layouts are dropped from the result's log (the file rows hold what the
    documents need of them), which keeps it small to send between processes.

    Raises:
        ParseError: the file is not a readable Darshan log or text dump.
        FileNotFoundError: it is gone.
    """
    if is_text_dump(path):
        with open(path, "rb") as fh:
            dl = parse_darshan_text(fh, path)
    else:
        dl = read_darshan(path)
    a = analyze(dl)
    return dataclasses.replace(a, log=dataclasses.replace(dl, tables={}, names={}, layouts={}))


def _work(path: str) -> tuple[str, Any]:
    try:
        return "ok", analyze_path(path)
    except ParseError as err:
        return "bad", (err.path, err.line_no, err.reason)


def _work_packed(path: str) -> tuple[str, Any]:
    """:func:`_work` in a worker: the file rows travel back as one JSON text (orjson), which
    costs a tenth of pickling thousands of dicts. Rows never hold None, so a ``null`` in the
    text is a NaN or an infinity that JSON cannot carry: such rows are pickled as they are."""
    status, value = _work(path)
    if status == "ok":
        rows = orjson.dumps(value.files)
        if b"null" not in rows:
            return "packed", (dataclasses.replace(value, files=[]), rows)
    return status, value


def _warm() -> None:
    _exit_with_parent()
    import darshan  # noqa: F401  (the costly import, once per worker)


def _exit_with_parent(poll_s: float = 1.0) -> None:
    """Make this worker exit once the process that started it is gone (killed with SIGKILL,
    out of memory): its work queue holds a copy of the pipe's write end, so it would otherwise
    wait for work forever, reparented to init. Checked every ``poll_s`` seconds."""
    started_by = multiprocessing.parent_process()  # known even if it died before this ran
    parent = started_by.pid if started_by is not None and started_by.pid else os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="parent-watch").start()


class DarshanPool:
    """Long-lived worker processes reading and analysing logs.

    The workers are a spawn-context :class:`~concurrent.futures.ProcessPoolExecutor` started
    on first use (spawn, because the shipper runs threads, which fork would copy in an
    undefined state); ``inline`` analyses in the calling process instead (no start-up cost,
    no protection from a crash).

    darshan-util is C: a damaged log it does not check can crash the process reading it. A
    worker that dies breaks the pool; each log whose analysis was lost is then read again
    alone in a fresh pool (never in the calling process), and a log that breaks the pool a
    second time is reported as damaged (:class:`ParseError`).
    """

    def __init__(self, workers: int = 0, *, inline: bool = False) -> None:
        self.workers = workers or os.cpu_count() or 1
        self.inline = inline
        self._pool: ProcessPoolExecutor | None = None
        self._futures: dict[str, Future[tuple[str, Any]]] = {}

    def submit(self, path: str) -> None:
        """Start analysing ``path`` in the background (no-op inline or when already started)."""
        if self.inline or path in self._futures:
            return
        if self._pool is None:
            ctx = multiprocessing.get_context("spawn")
            self._pool = ProcessPoolExecutor(self.workers, mp_context=ctx, initializer=_warm)
        self._futures[path] = self._pool.submit(_work_packed, path)

    def result(self, path: str) -> JobAnalysis:
        """The analysis of ``path`` (waits for a submitted one, or runs it here when there is
        no pool).

        Raises:
            ParseError: as :func:`analyze_path`, or the log crashed a worker twice.
        """
        status, value = _work(path) if self.inline else self._from_pool(path)
        if status == "bad":
            raise ParseError(*value)
        if status == "packed":
            analysis, rows = value
            value = dataclasses.replace(analysis, files=orjson.loads(rows))
        assert isinstance(value, JobAnalysis)
        return value

    def _from_pool(self, path: str) -> tuple[str, Any]:
        """What a worker made of ``path``: submitted now unless it was already; read again
        alone in a fresh pool when a worker died meanwhile (see the class docstring)."""
        for attempt in (1, 2):
            self.submit(path)
            fut = self._futures.pop(path)
            try:
                return fut.result()
            except BrokenProcessPool as err:
                # A worker died: the logs it and its siblings held are lost. They are read
                # again one by one as their results are asked for, so that a log that kills
                # a worker again is the one blamed.
                log.warning("Darshan worker pool broke (%s) on %s, try %s", err, path, attempt)
                self.close()
        raise ParseError(path, 0, "darshan-util crashed twice reading this log: it is damaged")

    def close(self) -> None:
        """Stop the workers."""
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None
        self._futures.clear()
