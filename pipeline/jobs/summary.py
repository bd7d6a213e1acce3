"""What one run of the main job did (``iolens run``/``ingest`` print it)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.sink.sender import AsyncSink


@dataclass
class RunSummary:
    """What one run did: files and lines read, bad lines, documents per data stream."""

    files: int = 0
    skipped: int = 0
    """Files found that were delivered before (to this cluster) with nothing new to read."""
    elsewhere: int = 0
    """Files not read because their lines were delivered to another cluster."""
    lines: int = 0
    bad_lines: int = 0
    bad_files: int = 0
    intervals: int = 0
    peer_windows: int = 0
    incidents: int = 0
    """Incident documents written (new or changed)."""
    docs: dict[str, dict[str, int]] = field(default_factory=dict)
    dead_letters: dict[str, int] = field(default_factory=dict)
    spooled: int = 0
    unsent: int = 0
    """Documents let go unacknowledged because the spool was full; their lines are read
    again on the next run."""

    def update(self, sink: AsyncSink, files: int) -> RunSummary:
        """Take the sink's counters and dead-letter counts (and ``files`` read); returns self."""
        self.files = files
        self.docs = {
            index: {
                "indexed": st.indexed,
                "duplicate": st.duplicate,
                "dead_lettered": st.dead_lettered,
            }
            for index, st in sink.stats().items()
        }
        self.dead_letters = dict(sink.deadletters.count())
        self.spooled = sink.spool.pending()
        self.unsent = sink.unsent + sum(st.unsent for st in sink.stats().values())
        return self
