"""What the lab's tests need of this machine: root, /dev/fuse, loop devices, the tools
``make test`` installs as root and Darshan's release source beside the checkout. A test that
needs them is skipped, naming what is missing; with ``IOLENS_REQUIRE_LAB=1`` (set by CI) it
fails instead, so a machine that should run the lab never passes by skipping it."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from elasticsearch import Elasticsearch

from pipeline.lab import storage
from pipeline.lab.darshan_build import DARSHAN_VERSION
from pipeline.sink.embedded import stop_detached

REQUIRE_ENV = "IOLENS_REQUIRE_LAB"
VENDORED_TARBALL = (
    Path(__file__).resolve().parents[3] / "shared" / "vendor" / f"darshan-{DARSHAN_VERSION}.tar.gz"
)

TOOLS = ("fio", "sadf", "mpiexec", "mpicc", "losetup", "mkfs.ext4", "ip", "unshare", "faketime")


def missing_for_lab() -> str | None:
    """Why the lab cannot run here, or None."""
    if os.geteuid() != 0:
        return "the lab needs root (loop devices, mounts)"
    for dev in ("/dev/fuse", "/dev/loop-control"):
        if not Path(dev).exists():
            return f"{dev} is missing on this machine"
    for tool in TOOLS:
        if shutil.which(tool) is None:
            return f"{tool} is not installed (make test installs it as root)"
    try:
        storage.check_host()
    except storage.LabError as err:
        return str(err)
    return None


def unavailable(why: str) -> None:
    """Skip with ``why``; fail with it where ``IOLENS_REQUIRE_LAB`` says the lab must run."""
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{why} ({REQUIRE_ENV}=1: this machine must run the lab's tests)")
    pytest.skip(why)


@pytest.fixture(scope="session")
def lab_host() -> None:
    """Skip (or fail, see :func:`unavailable`), with the reason, where the lab cannot run."""
    why = missing_for_lab()
    if why:
        unavailable(why)


@pytest.fixture(scope="session")
def darshan_tarball() -> Path:
    """Darshan's release source in ``../shared/vendor`` (skip or fail when it is missing)."""
    if not VENDORED_TARBALL.is_file():
        unavailable(f"{VENDORED_TARBALL} (Darshan's source) is missing")
    return VENDORED_TARBALL


@pytest.fixture(scope="session")
def mpi_tools() -> None:
    """``mpicc`` and ``mpiexec`` on PATH (skip or fail when one is missing)."""
    for tool in ("mpicc", "mpiexec"):
        if shutil.which(tool) is None:
            unavailable(f"{tool} not on PATH (apt-get install mpich libmpich-dev)")


def lab_docs(
    client: Elasticsearch, index: str, *filters: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Every document of ``index`` that matches ``filters``, with its ``_id`` (fails when the
    search did not return all of them)."""
    client.indices.refresh(index=index)
    resp = client.search(
        index=index, query={"bool": {"filter": list(filters)}}, size=10000, track_total_hits=True
    )
    assert resp["hits"]["total"]["value"] == len(resp["hits"]["hits"])  # all of them
    return [dict(h["_source"], _id=h["_id"]) for h in resp["hits"]["hits"]]


@contextmanager
def lab_client(url: str, lab_dir: Path) -> Iterator[Elasticsearch]:
    """A client of a finished lab's cluster; the lab's embedded server is stopped afterwards."""
    client = Elasticsearch(url, request_timeout=60)
    try:
        yield client
    finally:
        client.close()
        stop_detached(lab_dir / "noida-db")


def one_incident(client: Elasticsearch, namespace: str) -> dict[str, Any]:
    """The lab's one incident document; when there are more or none, fail with what each holds
    (LUN, start, end, status, id) and the faulty windows of every LUN, to tell a second LUN
    flagged from one incident indexed twice."""
    found = lab_docs(client, f"logs-iolens.incident-{namespace}")
    if len(found) == 1:
        return found[0]
    lines = [f"{len(found)} incidents:"]
    for d in sorted(found, key=lambda d: d["iolens"]["incident"]["start"]):
        inc = d["iolens"]["incident"]
        lines.append(
            f"  {inc['lun']} {inc['start']} .. {inc.get('end')} {inc['status']} id={d['_id']} "
            f"lease={d['iolens'].get('lease')} @timestamp={d['@timestamp']}"
        )
    faulty = lab_docs(
        client, f"metrics-iolens.peer_anomaly-{namespace}", {"term": {"iolens.faulty": True}}
    )
    per_lun: dict[str, list[str]] = {}
    for d in sorted(faulty, key=lambda d: d["iolens"]["peer"]["window"]["end_s"]):
        peer = d["iolens"]["peer"]
        per_lun.setdefault(peer["lun"], []).append(f"{peer['metric']}@{peer['window']['end_s']}")
    lines += [f"  faulty {lun}: {' '.join(ws)}" for lun, ws in sorted(per_lun.items())]
    pytest.fail("\n".join(lines))
