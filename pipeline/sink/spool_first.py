"""Delivering what an earlier run spooled before anything else is opened.

A state directory whose file system the spool filled may have no room for the registry's and
the jobs' SQLite files to open (their ``-wal`` and ``-shm`` files are made on opening). The
spool is sent first, which frees that room when the cluster answers. Its documents'
acknowledgements go nowhere: their lines were never committed (a spooled document is not
acknowledged), so the run reads them again and the cluster answers 409 (already there).
"""

from __future__ import annotations

import logging
from pathlib import Path

from elasticsearch import Elasticsearch

from pipeline.settings import SinkSettings
from pipeline.sink.bulk import BulkSink
from pipeline.sink.disk import DiskWatch
from pipeline.sink.spool import Spool

log = logging.getLogger(__name__)


def deliver_spool_first(
    client: Elasticsearch, settings: SinkSettings, state_dir: Path, disk: DiskWatch
) -> int:
    """Send the documents spooled in ``state_dir/spool`` (if any) until the cluster stops
    answering.

    Args:
        client: the cluster (without transport retries: the sink owns them).
        settings: the sink's settings.
        state_dir: the state directory.
        disk: the state directory's watch (told when it has room again).

    Returns:
        How many documents left the spool.
    """
    before = Spool(state_dir / "spool").pending()
    if not before:
        return 0
    sink = BulkSink(client, settings, state_dir, disk=disk)
    sink.flush()
    after = sink.spool.pending()
    sink.close()
    log.info(
        "delivered %s documents spooled by an earlier run before reading; %s still spooled",
        before - after,
        after,
    )
    return before - after
