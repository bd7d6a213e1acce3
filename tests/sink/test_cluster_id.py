"""Which cluster this is: ``cluster_uuid``, or the identity document on noida-db."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, cast

import pytest
from elasticsearch import Elasticsearch

from pipeline.sink.cluster_id import MARKER_ID, MARKER_INDEX, cluster_id
from pipeline.sink.embedded import EmbeddedServer, free_port

pytestmark = pytest.mark.integration


def test_noida_db_gets_an_identity_of_its_own_kept_with_its_data(tmp_path: Path) -> None:
    ids = []
    for name in ("one", "two", "one"):  # "one" twice: the same data directory, restarted
        server = EmbeddedServer(tmp_path / name, free_port())
        server.start(timeout_s=30.0)
        client = Elasticsearch(server.url, request_timeout=30)
        try:
            assert client.info()["cluster_uuid"] == "noida-local"  # the same for every server
            before = cluster_id(client, create=False)
            ids.append((before, cluster_id(client), cluster_id(client, create=False)))
            doc = client.get(index=MARKER_INDEX, id=MARKER_ID)["_source"]
        finally:
            client.close()
            server.stop()
        assert ids[-1][1] == f"iolens:{doc['uuid']}"
        assert re.fullmatch(r"iolens:[0-9a-f]{32}", str(ids[-1][1]))
    (none_1, one, one_again), (none_2, two, _), (first_read, restarted, _) = ids
    assert (none_1, none_2) == (None, None)  # read only: nothing written
    assert one == one_again == first_read == restarted
    assert two != one


class _Info:
    """A client that answers only ``GET /`` (a real cluster's answer, or a failure)."""

    def __init__(self, answer: dict[str, Any] | Exception) -> None:
        self.answer = answer

    def info(self) -> dict[str, Any]:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def test_a_real_cluster_is_its_cluster_uuid() -> None:
    info = {"name": "node-1", "cluster_name": "prod", "cluster_uuid": "0sUaXJHTQ7Cw3tJ3mQ3sVg"}
    client = cast(Elasticsearch, _Info(info))
    assert cluster_id(client) == "0sUaXJHTQ7Cw3tJ3mQ3sVg"


def test_an_unreachable_cluster_has_no_identity() -> None:
    client = Elasticsearch("http://127.0.0.1:1", max_retries=0)
    try:
        assert cluster_id(client) is None
    finally:
        client.close()
