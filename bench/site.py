"""Site sizing: what each input stream costs per host-day, and what a site's cluster must hold.

For each stream (fio, sysstat, darshan, slurm, events) in turn, ``--hosts`` hosts' worth of its
input is written into a drop directory at the site's rates (:class:`site_streams.Rates`),
time-compressed: a simulated span (``--span-scale`` times the plan below) in ``--write-s``
seconds of wall time. A fresh ``iolens run`` child process (default configuration, native
observer) ships it into one embedded noida-db server started here, each stream under a
namespace of its own (``site<stream>``), so that each stream's cost is its own:

1. start ``iolens run`` and wait until its start-up is over (CPU quiet);
2. ``--idle-s`` seconds idle: the instance's idle CPU rate (watching, scheduled jobs);
3. write the span; 4. wait until every input unit is a document and no count changed for 6 s
   (plus ``fio.settle_s`` for fio; the pipeline's own periodic documents aside);
5. SIGTERM, reap with ``os.wait4``.

Per host-day: CPU = (CPU of steps 3-4 - idle rate x their wall time) x 86,400 / span / hosts
+ idle rate x 86,400; documents and bytes = the namespace's x 86,400 / span / hosts
(``store.size`` of ``GET _cat/indices?bytes=b``); peak RSS = the largest of the process tree's
summed RSS (sampled every 0.5 s) and ``ru_maxrss`` (a catch-up at the speed-up, so an upper
bound for steady state). The pipeline's own periodic documents (``metrics-iolens.pipeline``,
``.service_rate``, ``.workload_model``) scale with the instance's wall time instead. Then the
embedded server's own memory and disk per document held. Site totals for 100 and 1,000 hosts
follow from ``--mix``, the share of a site's hosts that run each stream.

Usage::

    .venv/bin/python bench/site.py              # every stream, ~8 minutes on 2 cores
    .venv/bin/python bench/site.py --quick      # a smoke run, about a minute and a half
    .venv/bin/python bench/site.py --streams fio,events --hosts 1 --mix fio=0.2,events=0.5

Writes ``bench/out/site.json`` and ``bench/out/site.md`` (the sizing table).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
OUT_DIR = BENCH_DIR / "out"
WORK_DIR = OUT_DIR / "site"
sys.path.insert(0, str(ROOT))

from fio_hist import source_state  # noqa: E402
from proc_measure import _wait_exit  # noqa: E402
from site_measure import (  # noqa: E402
    Sampler,
    hwm_bytes,
    index_stats,
    tree_cpu_s,
    tree_rss_bytes,
    wait_drained,
)
from site_report import DEFAULT_MIX, Cluster, Mix, build, markdown, print_tables  # noqa: E402
from site_streams import STREAMS, Rates, Stream, SysstatStream, span_note  # noqa: E402

from pipeline.sink.embedded import EmbeddedServer, free_port  # noqa: E402

SPAN_S = {"fio": 300, "sysstat": 2 * 3600, "darshan": 3600, "slurm": 3 * 3600, "events": 720}
"""Simulated seconds per stream at ``--span-scale 1`` (``--quick`` takes a tenth)."""
RUN_ORDER = "darshan,slurm,events,sysstat,fio"
"""Least server memory per document first: memory one stream's run grew and freed would be
reused by the next, hiding part of the next one's growth."""
QUICK_OVERRIDES = {"jobs": {"tick_s": 1.0}, "fio": {"settle_s": 2.0}}
"""``--quick`` only: scheduled jobs every second and fio intervals settled after 2 s."""
TRAIN_S = 2 * 3600.0  # fault-free sysstat before the span, for iolens train (not measured)
console = Console(stderr=True, width=None if sys.stderr.isatty() else 120)


@dataclass
class StreamRun:
    """What one stream's ``iolens run`` measured (seconds, bytes, documents)."""

    stream: str
    hosts: int
    span_s: float
    write_wall_s: float
    expected: int
    startup_cpu_s: float = 0.0
    idle_cpu_per_s: float = 0.0
    work_cpu_s: float = 0.0
    work_wall_s: float = 0.0
    life_wall_s: float = 0.0
    peak_rss_bytes: int = 0
    main_maxrss_bytes: int = 0
    wait4_cpu_s: float = 0.0
    exit_code: int = 0
    drained: bool = False
    docs: dict[str, int] = field(default_factory=dict)
    store_bytes: dict[str, int] = field(default_factory=dict)
    input_bytes: int = 0
    server_rss_delta_bytes: int = 0


@dataclass(frozen=True)
class Context:
    """What every stream's run shares."""

    work: Path
    client: Any
    url: str
    hosts: int
    rates: Rates
    write_s: float
    idle_s: float
    quiet_s: float
    span_scale: float
    overrides: dict[str, Any]


def merged(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``extra`` merged in, section by section."""
    out = dict(base)
    for k, v in extra.items():
        out[k] = merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def write_config(root: Path, ctx: Context, namespace: str, stream: Stream) -> Path:
    """The run's configuration: defaults, this cluster and namespace, the stream's drop."""
    config = {
        "elasticsearch": {"url": ctx.url, "namespace": namespace},
        "embedded": {"enabled": False},
        "state_dir": str(root / "state"),
        "drops": [stream.drop()],
    }
    config = merged(merged(config, stream.settings()), ctx.overrides)
    path = root / "iolens.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def iolens(config: Path, *args: str) -> list[str]:
    """The command line of ``iolens --config CONFIG ARGS`` in this interpreter."""
    return [sys.executable, "-m", "pipeline.cli.main", "--config", str(config), *args]


def wait_started(pid: int, sampler: Sampler, timeout_s: float = 30.0) -> float:
    """Wait until the tree used under 0.03 s of CPU in a second (start-up over); its CPU (s)."""
    start = time.monotonic()
    before = tree_cpu_s(pid)
    while time.monotonic() - start < timeout_s:
        for _ in range(4):
            time.sleep(0.25)
            sampler.sample()
        now = tree_cpu_s(pid)
        if now - before < 0.03 and time.monotonic() - start > 2:
            return now
        before = now
    return before


def replay(stream: Stream, span_s: float, write_s: float, sampler: Sampler) -> None:
    """Write ``span_s`` simulated seconds of ``stream`` over ``write_s`` wall seconds."""
    start = time.monotonic()
    while (elapsed := time.monotonic() - start) < write_s:
        stream.write_until(span_s * elapsed / write_s)
        sampler.sample()
        time.sleep(0.25)
    stream.write_until(span_s)
    stream.finish()


def measure_run(
    run: StreamRun, stream: Stream, proc: subprocess.Popen[bytes], ctx: Context
) -> None:
    """Steps 1-4 of the module docstring on a started ``iolens run``; fills ``run``."""
    started = time.monotonic()
    sampler = Sampler(proc.pid)
    run.startup_cpu_s = wait_started(proc.pid, sampler)
    t_a, cpu_a = time.monotonic(), run.startup_cpu_s
    while time.monotonic() - t_a < ctx.idle_s:
        sampler.sample()
        time.sleep(0.5)
    t_b, cpu_b = time.monotonic(), tree_cpu_s(proc.pid)
    run.idle_cpu_per_s = max(0.0, (cpu_b - cpu_a) / (t_b - t_a))
    replay(stream, run.span_s, ctx.write_s, sampler)
    run.expected = stream.expected
    namespace = f"site{run.stream}"
    primary = f"{stream.primary}-{namespace}"
    stats, run.drained = wait_drained(
        lambda: index_stats(ctx.client, namespace),
        primary,
        stream.expected,
        quiet_s=ctx.quiet_s + stream.settle_s(ctx.overrides),
        timeout_s=180.0,
        tick=sampler.sample,
    )
    t_c, cpu_c = time.monotonic(), tree_cpu_s(proc.pid)
    run.work_wall_s = t_c - t_b
    run.life_wall_s = t_c - started
    run.work_cpu_s = max(0.0, cpu_c - cpu_b - run.idle_cpu_per_s * run.work_wall_s)
    run.peak_rss_bytes = max(sampler.peak_bytes, hwm_bytes(proc.pid))
    run.docs, run.store_bytes = stats.docs, stats.store_bytes


def stop(proc: subprocess.Popen[bytes], run: StreamRun) -> None:
    """SIGTERM the run, reap it with ``os.wait4`` (SIGKILL after 150 s)."""
    proc.send_signal(signal.SIGTERM)
    _wait_exit(proc.pid, 150.0)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = run.exit_code = os.waitstatus_to_exitcode(status)
    run.main_maxrss_bytes = usage.ru_maxrss * 1024
    run.wait4_cpu_s = usage.ru_utime + usage.ru_stime
    run.peak_rss_bytes = max(run.peak_rss_bytes, run.main_maxrss_bytes)


def run_stream(name: str, ctx: Context) -> StreamRun:
    """One stream through a fresh ``iolens run``: the measurement of the module docstring."""
    span_s = SPAN_S[name] * ctx.span_scale
    root = ctx.work / name
    t0_s = time.time() - span_s - 600  # the span ends ten minutes ago: everything has settled
    stream = STREAMS[name](root / "drop", ctx.hosts, ctx.rates, t0_s)
    config = write_config(root, ctx, f"site{name}", stream)
    if isinstance(stream, SysstatStream):
        stream.training_file(root / "train.csv", TRAIN_S)
        subprocess.run(
            iolens(config, "train", str(root / "train.csv")), check=True, capture_output=True
        )
    run = StreamRun(name, ctx.hosts, span_s, ctx.write_s, 0)
    with open(root / "iolens.log", "wb") as log:
        proc = subprocess.Popen(iolens(config, "run"), stdout=log, stderr=subprocess.STDOUT)
    try:
        measure_run(run, stream, proc, ctx)
        stop(proc, run)
    finally:
        if proc.returncode is None:
            proc.kill()
            proc.wait()
    run.input_bytes = sum(p.stat().st_size for p in (root / "drop").rglob("*") if p.is_file())
    shutil.rmtree(root / "drop")  # its logs and state stay in bench/out/site/<stream>/
    return run


def parse_rates(text: str) -> Rates:
    """:class:`Rates` with ``field=value,...`` changed.

    Raises:
        ValueError: an unknown field or a value of the wrong type.
    """
    changes: dict[str, Any] = {}
    defaults = asdict(Rates())
    for part in filter(None, text.split(",")):
        name, _, value = part.partition("=")
        if name not in defaults:
            raise ValueError(f"--rates {part!r}: fields are {', '.join(defaults)}")
        changes[name] = type(defaults[name])(value)
    return replace(Rates(), **changes)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--quick", action="store_true", help="a smoke run (~1.5 minutes)")
    p.add_argument("--streams", default=RUN_ORDER, help=f"streams to run, in order ({RUN_ORDER})")
    p.add_argument("--hosts", type=int, default=2, help="hosts per stream (default 2)")
    p.add_argument("--write-s", type=float, help="wall seconds of writing per stream (45)")
    p.add_argument("--idle-s", type=float, help="wall seconds idle before writing (20)")
    p.add_argument("--span-scale", type=float, help="times the simulated spans (1; quick 0.1)")
    p.add_argument("--mix", default=DEFAULT_MIX, help=f"share of hosts per stream ({DEFAULT_MIX})")
    p.add_argument("--rates", default="", help="Rates fields to change, e.g. requests_per_s=20")
    p.add_argument(
        "--from-json",
        type=Path,
        help="no measuring: the tables of an earlier site.json again, with this --mix",
    )
    args = p.parse_args(argv)
    quick = args.quick
    args.streams = args.streams.split(",")
    if unknown := set(args.streams) - set(STREAMS):
        p.error(f"--streams: unknown {', '.join(sorted(unknown))} (known: {', '.join(STREAMS)})")
    try:
        args.mix = Mix.parse(args.mix)
        args.rates = parse_rates(args.rates)
    except ValueError as err:
        p.error(str(err))
    args.write_s = args.write_s or (4.0 if quick else 45.0)
    args.idle_s = args.idle_s or (2.0 if quick else 20.0)
    args.span_scale = args.span_scale or (0.1 if quick else 1.0)
    args.quiet_s = 2.0 if quick else 6.0  # jobs.tick_s + 1
    args.overrides = QUICK_OVERRIDES if quick else {}
    return args


def server_stats(server: EmbeddedServer, client: Any, empty_rss: int) -> dict[str, Any]:
    """The embedded server after every stream: its RSS (bytes), documents and store bytes."""
    client.indices.refresh(index="*", ignore_unavailable=True, allow_no_indices=True)
    rows = client.cat.indices(format="json", bytes="b")
    pid = server.pid or 0
    return {
        "empty_rss_bytes": empty_rss,
        "rss_bytes": tree_rss_bytes(pid),
        "hwm_bytes": hwm_bytes(pid),
        "docs": sum(int(r["docs.count"]) for r in rows),
        "store_bytes": sum(int(r["store.size"]) for r in rows),
    }


def run_all(args: argparse.Namespace) -> tuple[list[StreamRun], dict[str, Any]]:
    """Start the embedded server, run every stream against it, stop it; the runs and the
    server's figures (its data directory's size is taken after the stop, which saves it)."""
    from elasticsearch import Elasticsearch

    shutil.rmtree(WORK_DIR, ignore_errors=True)
    server = EmbeddedServer(WORK_DIR / "db", free_port())
    server.start(timeout_s=30)
    client = Elasticsearch(server.url, request_timeout=300)
    runs: list[StreamRun] = []
    try:
        empty_rss = tree_rss_bytes(server.pid or 0)
        ctx = Context(WORK_DIR, client, server.url, args.hosts, args.rates, args.write_s,
                      args.idle_s, args.quiet_s, args.span_scale, args.overrides)  # fmt: skip
        for name in args.streams:
            console.log(f"{name}: {args.hosts} hosts, {span_note(SPAN_S[name] * args.span_scale)}"
                        f" simulated in {args.write_s:g} s")  # fmt: skip
            before = tree_rss_bytes(server.pid or 0)
            runs.append(r := run_stream(name, ctx))
            r.server_rss_delta_bytes = tree_rss_bytes(server.pid or 0) - before
            console.log(f"{name}: {sum(r.docs.values()):,} documents, {r.work_cpu_s:.2f} s CPU, "
                        f"drained: {r.drained}, exit {r.exit_code}")  # fmt: skip
        stats = server_stats(server, client, empty_rss)
    finally:
        client.close()
        server.stop()
    stats["disk_bytes"] = sum(p.stat().st_size for p in (WORK_DIR / "db").iterdir())
    return runs, stats


def measure(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    """Run the benchmark; its results as plain data (``site.json`` without the tables)."""
    started = time.monotonic()
    runs, server = run_all(args)
    return {
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "command": " ".join(["bench/site.py", *argv]),
        "iolens_source": source_state(ROOT),
        "machine": f"{os.cpu_count()} CPUs, Python {platform.python_version()}",
        "wall_s": time.monotonic() - started,
        "rates": asdict(args.rates),
        "mix": args.mix.shares,
        "cluster": asdict(Cluster()),
        "runs": [asdict(r) for r in runs],
        "server": server,
    }


def main(argv: list[str] | None = None) -> int:
    """Run every stream (or read ``--from-json``), print and write the tables; 0 if every run
    drained and exited 0."""
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.from_json:
        result = json.loads(args.from_json.read_text())
        result["mix"] = args.mix.shares
    else:
        result = measure(args, argv)
    report = build(result)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    (OUT_DIR / "site.json").write_text(json.dumps({**result, **report}, indent=1) + "\n")
    (OUT_DIR / "site.md").write_text(markdown(result, report))
    print_tables(console, result, report)
    console.log(f"wrote {OUT_DIR / 'site.json'} and {OUT_DIR / 'site.md'}")
    return 0 if all(r["drained"] and r["exit_code"] == 0 for r in result["runs"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
