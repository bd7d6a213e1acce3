"""The subcommands as users type them, against the embedded server."""

from __future__ import annotations

import gc
import http.server
import shutil
import threading
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from pipeline.cli.main import COLLECTOR_THRESHOLDS, main

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "fio" / "samples"

pytestmark = pytest.mark.integration


def test_setup_ingest_status_deadletter(
    es_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "300")  # rich tables: one line per row
    ns = f"cli{uuid.uuid4().hex[:8]}"
    config = tmp_path / "iolens.yaml"
    state = tmp_path / "state"
    config.write_text(
        f"elasticsearch: {{namespace: {ns}}}\nstate_dir: {state}\n"
        "fio: {run_start: '2026-01-01T00:00:00Z', settle_s: 0}\n"
    )
    base = ["--config", str(config), "--es-url", es_url]

    assert main([*base, "setup"]) == 0
    out = capsys.readouterr().out
    assert "installed index template metrics-fio.histogram (version 1)" in out
    assert "ILM is not available on this cluster" in out

    logs = tmp_path / "logs"
    shutil.copytree(SAMPLES / "node01", logs)
    bad = logs / "randrw_clat_hist.1.log"
    bad.write_bytes(bad.read_bytes() + b"123, 0, 4096, 7\n")
    assert main([*base, "ingest", "--type", "fio-hist", *map(str, sorted(logs.glob("*.log")))]) == 0
    out = capsys.readouterr().out
    assert "files read: 2   lines: 160   bad lines: 1" in out
    assert f"metrics-fio.histogram-{ns}" in out

    assert main([*base, "status"]) == 0
    out = capsys.readouterr().out
    assert "randrw_clat_hist.1.log" in out
    assert "dead letters: documents 0, inputs 1" in out
    assert f"cluster: {es_url} answers" in out
    assert "service rates (items/s), as of" in out  # what the ingest's monitor saw

    assert main([*base, "deadletter", "list"]) == 0
    out = capsys.readouterr().out
    assert "randrw_clat_hist.1.log:80" in out and "i1" in out
    assert main([*base, "dlq", "show", "i1"]) == 0  # the alias, and one entry whole
    out = capsys.readouterr().out
    assert out.startswith(f"{bad}:80\nstage: parse\n")
    assert out.endswith("line (15 bytes):\n123, 0, 4096, 7\n")
    assert main([*base, "dlq", "show", "i2"]) == 2
    assert "no dead letter i2" in capsys.readouterr().err


def test_config_errors_exit_2_and_name_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "iolens.yaml"
    config.write_text("fio: {intervall_ms: 100}\n")
    assert main(["--config", str(config), "run", "--once"]) == 2
    assert "fio.intervall_ms: Extra inputs are not permitted" in capsys.readouterr().err


def test_a_drop_of_an_unknown_format_is_refused_by_config_check_and_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "iolens.yaml"
    (tmp_path / "drop").mkdir()
    drops = f"drops: [{{type: sar, path: {tmp_path}}}]"
    config.write_text(f"state_dir: {tmp_path / 'state'}\n{drops}\n")
    said = "drops[0].type: 'sar' is not a drop format iolens reads (fio-hist, sadf, sadc, darshan,"
    assert main(["--config", str(config), "config", "check"]) == 2
    assert said in capsys.readouterr().err
    assert main(["--config", str(config), "run", "--once"]) == 2
    assert said in capsys.readouterr().err


def test_run_needs_a_drop(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "iolens.yaml"
    config.write_text("{}\n")
    assert main(["--config", str(config), "run", "--once", "--drop", "sar=/x"]) == 2
    assert "--drop 'sar=/x': expected TYPE=DIR with TYPE one of fio-hist, sadf, sadc" in (
        capsys.readouterr().err
    )


def test_status_shows_the_rates_and_the_bottleneck() -> None:
    from rich.console import Console

    from pipeline.cli.status_cmd import print_rates

    estimate = {"rate_per_s": 183.4, "confidence": "high"}
    state = {
        "time": 1795350000.0,
        "bottleneck": "sink",
        "stages": {
            "produce": {
                "estimate": None,
                "throughput_per_s": 180.2,
                "utilisation": None,
                "blocked_share": 0.93,
            },
            "sink": {
                "estimate": estimate,
                "throughput_per_s": 180.2,
                "utilisation": 0.9826,
                "blocked_share": 0.0,
            },
        },
    }
    console = Console(width=200, record=True)
    print_rates(console, state)
    out = console.export_text()
    assert "service rates (items/s), as of 2026-11-22 12:20:00 UTC" in out
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") > 3}
    assert [c.strip() for c in rows["sink (bottleneck)"].split("│")[1:-1]] == [
        "sink (bottleneck)",
        "183",
        "high",
        "180",
        "98%",
        "0%",
    ]
    assert [c.strip() for c in rows["produce"].split("│")[1:-1]] == [
        "produce",
        "-",
        "-",
        "180",
        "-",
        "93%",
    ]
    console = Console(width=200, record=True)
    print_rates(console, None)
    assert "none measured yet" in console.export_text()


def test_status_says_when_the_seed_method_failed() -> None:
    from rich.console import Console

    from pipeline.cli.status_cmd import print_rates

    row = {"throughput_per_s": 50.0, "utilisation": None, "blocked_share": 0.9}
    state = {
        "time": 1795350000.0,
        "bottleneck": None,
        "stages": {
            "sink": {"estimate": None, "failures": 4, "method_failed": True, **row},
            "produce": {
                "estimate": {"rate_per_s": 183.4, "confidence": "high"},
                "failures": 2,
                "method_failed": True,
                **row,
            },
        },
    }
    console = Console(width=200, record=True)
    print_rates(console, state)
    rows = {
        line.split("│")[1].strip(): [c.strip() for c in line.split("│")[1:-1]]
        for line in console.export_text().splitlines()
        if line.count("│") > 3
    }
    assert rows["sink"][1:3] == ["-", "method failed"]
    assert rows["produce"][1:3] == ["183", "method failed (2x); last kept"]


class BulkRefusingProxy:
    """An HTTP proxy in front of the test server that answers every ``_bulk`` request with
    503 (as a cluster whose write thread pool is gone would) and forwards the rest."""

    def __init__(self, upstream: str) -> None:
        class Handler(http.server.BaseHTTPRequestHandler):
            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if "/_bulk" in self.path:
                    self._answer(503, b'{"error":{"type":"unavailable"},"status":503}', {})
                    return
                headers = {
                    k: v for k, v in self.headers.items() if k.lower() in ("content-type", "accept")
                }
                req = urllib.request.Request(
                    upstream + self.path, body or None, headers, method=self.command
                )
                try:
                    with urllib.request.urlopen(req, timeout=30) as resp:
                        self._answer(resp.status, resp.read(), dict(resp.headers))
                except urllib.error.HTTPError as err:
                    self._answer(err.code, err.read(), dict(err.headers))

            def _answer(self, status: int, payload: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                self.send_header("Content-Type", headers.get("Content-Type", "application/json"))
                self.send_header("X-Elastic-Product", "Elasticsearch")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _forward

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> BulkRefusingProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_run_once_exits_75_when_the_spool_fills(
    es_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "iolens.yaml"
    config.write_text(
        f"elasticsearch: {{namespace: full{uuid.uuid4().hex[:6]}}}\nstate_dir: {tmp_path}/s\n"
        "fio: {run_start: '2026-01-01T00:00:00Z', settle_s: 0}\n"
        "sink: {max_retries: 0, chunk_max_docs: 10, spool_max_bytes: 60000}\n"
    )
    shutil.copytree(SAMPLES / "node01", tmp_path / "logs")
    with BulkRefusingProxy(es_url) as proxy:
        argv = ["--config", str(config), "--es-url", proxy.url, "run", "--once"]
        assert main([*argv, "--drop", f"fio-hist={tmp_path / 'logs'}"]) == 75
    out = capsys.readouterr().out
    assert "documents were neither delivered nor spooled (the spool is full" in out
    spooled = sum(p.stat().st_size for p in (tmp_path / "s" / "spool").glob("seg-*"))
    assert 0 < spooled <= 60000


def test_a_command_runs_with_the_collector_tuned(capsys: pytest.CaptureFixture[str]) -> None:
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        assert main(["config", "example"]) == 0
        assert gc.get_threshold() == COLLECTOR_THRESHOLDS == (50_000, 10, 10)
    finally:
        gc.set_threshold(*before)
    assert "elasticsearch:" in capsys.readouterr().out
