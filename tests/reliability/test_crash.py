"""Crash consistency (DESIGN.md, delivery promise): ``iolens run`` killed with SIGKILL at random
moments while it ingests a mixed drop, restarted each time, ends with exactly the documents of
a clean run: the same ids, none missing, none twice, and every file committed to its end."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from elasticsearch import Elasticsearch

from pipeline.shippers.registry import Registry

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "workloads"))
sys.path.insert(0, str(ROOT / "tests" / "reliability"))
from http_client import serve  # noqa: E402
from mixed_drop import DERIVED, finished, grow, ids, iolens, sources, write_config  # noqa: E402

KILLS = 20

pytestmark = [pytest.mark.integration, pytest.mark.reliability]


@pytest.fixture(scope="module")
def events(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    tmp = tmp_path_factory.mktemp("server")
    serve(tmp, 3, 20, 31)
    return (tmp / "events.jsonl").read_bytes()


def test_sigkill_at_random_moments_loses_and_duplicates_nothing(
    es_url: str, client: Elasticsearch, tmp_path: Path, events: bytes
) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    rng = random.Random(8)
    before_last = 0
    results: dict[str, dict[str, list[str]]] = {}
    committed: dict[str, dict[str, tuple[int, int]]] = {}
    killed_while_busy = 0
    files = sources(events)
    for name, kills in (("clean", 0), ("crash", KILLS)):
        ns = f"{name}{uuid.uuid4().hex[:6]}"
        drop, state, config = tmp_path / name, tmp_path / f"{name}-state", tmp_path / f"{name}.yaml"
        write_config(config, es_url, ns, drop, state)
        for k in range(kills):
            grow(drop, files, k + 1, kills + 1)  # more input for every life of the process
            proc = subprocess.Popen(
                iolens(config, "run"), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env
            )
            time.sleep(rng.uniform(0.8, 2.5))  # start-up takes about a second
            killed_while_busy += proc.poll() is None
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        if kills:
            partial = ids(client, ns)
            before_last = sum(map(len, partial.values()))
        grow(drop, files, 1, 1)
        finished(drop)
        done = subprocess.run(
            iolens(config, "run", "--once"), capture_output=True, text=True, env=env, timeout=300
        )
        assert done.returncode == 0, done.stdout + done.stderr
        results[name] = ids(client, ns)
        reg = Registry(state / "registry.sqlite")
        committed[name] = {
            str(Path(st.path).relative_to(drop)): (st.offset, st.line_no) for st in reg.all()
        }
        reg.close()
        # fio and event logs are committed to their ends (a sadf CSV keeps its last interval,
        # still open, for lines to come)
        for rel, (offset, _n) in committed[name].items():
            if not rel.startswith(("sysstat", "darshan")):
                assert offset == (drop / rel).stat().st_size, rel
    assert killed_while_busy == KILLS
    clean, crash = results["clean"], results["crash"]
    # the killed processes did part of the work, the last run the rest
    assert 0 < before_last < sum(map(len, crash.values()))
    for stream in DERIVED:
        assert clean[stream], stream
        assert len(crash[stream]) == len(set(crash[stream])), stream
        assert crash[stream] == clean[stream], stream
    assert committed["crash"] == committed["clean"]  # the registries agree, file by file
    counts: dict[str, Any] = {s: len(v) for s, v in clean.items()}
    assert counts["logs-iolens.request"] == 60
