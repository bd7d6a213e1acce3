"""Offline peer diagnosis at Intrepid's size: one day of 1 s ``sadf -d`` data, 1,152 LUNs.

Seed 001 section 4.5 / Table 3 analysed await for the first FOUR peer groups of one day
(2011-05-09) on one 2.4 GHz Opteron core: dump 1.8 h / <10 MB, table 7.1 h / 1.1 GB, diagprep
49 m / 6.1 GB, diagnose 1.6 s / 36 MB, total 9.7 h / 6.1 GB. This benchmark does the whole
machine: 32 peer groups of 36 LUNs (4 servers x 9 LUNs per group, 128 servers).

1. Generate (cached under ``bench/out/peer/<set>/`` while ``manifest.json`` matches): one
   ``sadf -d`` CSV per server, written by :mod:`sadf_lines`; a group's LUNs share a diurnal,
   slowly wandering load; each LUN has a static bias and per-second noise; await follows an
   M/M/1-like curve of utilisation; a few LUNs get await x ``FAULT_MULT`` after training.
2. Run each stage in its own child process (peak RSS from ``os.wait4``, like
   ``/usr/bin/time -v``): ``ingest`` (parse + downsample 1 s -> 15 s:
   :func:`pipeline.jobs.peer_fast.downsample_files`, full intervals saved as ``.npy``),
   ``train`` (thresholds on the fault-free hours), ``diagnose`` (peer comparison of await after
   training, then the persistence ordering, timed apart).
3. Print the table beside Table 3 and check that the LUNs indicted are the injected ones.

    .venv/bin/python bench/peer_diagnosis.py            # 32 groups x 36 LUNs x 24 h
    .venv/bin/python bench/peer_diagnosis.py --quick    # 2 groups x 36 LUNs x 4 h
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sadf_lines import HEADER, rows_bytes

OUT = Path(__file__).resolve().parent / "out" / "peer"
START_S = 1_767_571_200  # 2026-01-05 00:00:00 UTC
FAULT_MULT = 3.0
SEED_TABLE = {  # seed 001 Table 3, four peer groups (144 LUNs), one core: (seconds, bytes)
    "dump": (1.8 * 3600, 10e6),
    "table": (7.1 * 3600, 1.1e9),
    "diagprep": (49 * 60, 6.1e9),
    "diagnose": (1.6, 36e6),
    "total": (9.7 * 3600, 6.1e9),
}


def config(args: argparse.Namespace) -> dict[str, Any]:
    groups, hours = (2, 4.0) if args.quick else (args.groups, args.hours)
    seconds = int(hours * 3600)
    faults = [  # (group, server, lun): one LUN in every 8th group
        (g, (g // 8) % args.servers, (g * 5) % args.luns) for g in range(0, groups, 8)
    ]
    if args.quick:
        faults = [(0, 1, 4), (1, 2, 7)]
    return {
        "groups": groups,
        "servers": args.servers,
        "luns": args.luns,
        "seconds": seconds,
        "seed": args.seed,
        "train_until_s": START_S + round(seconds * 0.4 / 3600) * 3600,
        "fault_s": [START_S + int(seconds * 0.55), START_S + int(seconds * 0.8)],
        "faults": faults,
        "date_timestamps": not args.epoch,
    }


def host_name(g: int, s: int) -> str:
    return f"fs{g:02d}-{s}"


def lun_name(i: int) -> str:
    return f"sd{chr(ord('b') + i)}"


def group_load(cfg: dict[str, Any], g: int) -> np.ndarray:
    """Shared I/O rate of group g per second: diurnal x slow wander (lognormal, ~20 min)."""
    rng = np.random.default_rng([cfg["seed"], g])
    t = np.arange(cfg["seconds"]) / 3600.0
    diurnal = 1.0 + 0.6 * np.sin(2 * np.pi * (t - 10.0) / 24.0)
    walk = np.cumsum(rng.normal(0.0, 1.0, cfg["seconds"] + 1200))
    smooth = (walk[1200:] - walk[:-1200]) / 1200.0 * 20.0  # ~N(0, 0.58)
    return 150.0 * diurnal * np.exp(0.5 * smooth)


def server_values(cfg: dict[str, Any], g: int, s: int, lam_g: np.ndarray) -> np.ndarray:
    """``(seconds, luns, 8)`` sadf metrics of one server."""
    rng = np.random.default_rng([cfg["seed"], g, s])
    n, m = cfg["seconds"], cfg["luns"]
    bias = rng.uniform(0.97, 1.03, m)
    lam = lam_g[:, None] * bias * rng.lognormal(0.0, 0.15, (n, m))
    tps = rng.poisson(lam).astype(np.float64)
    areq = (48.0 + 16.0 * g % 64) * rng.lognormal(0.0, 0.1, (n, m))
    read = rng.uniform(0.5, 0.7, (n, m))
    service_ms = 0.3 + areq / 400.0
    rho = np.minimum(tps * service_ms / 1000.0, 0.9)
    await_ms = service_ms / (1.0 - rho) * rng.lognormal(0.0, 0.25, (n, m))
    lo, hi = (f - START_S for f in cfg["fault_s"])
    for fg, fs, fl in cfg["faults"]:
        if (fg, fs) == (g, s):
            await_ms[lo:hi, fl] *= FAULT_MULT
    idle = tps == 0
    areq[idle] = 0.0
    await_ms[idle] = 0.0
    out = np.empty((n, m, 8))
    out[..., 0] = tps
    out[..., 1] = tps * areq * read
    out[..., 2] = tps * areq * (1.0 - read)
    out[..., 3] = 0.0
    out[..., 4] = areq
    out[..., 5] = tps * await_ms / 1000.0
    out[..., 6] = await_ms
    out[..., 7] = 100.0 * np.minimum(1.0, tps * service_ms / 1000.0)
    return np.round(out, 2)


def write_server(cfg: dict[str, Any], g: int, s: int, path: Path) -> int:
    lam_g = group_load(cfg, g)
    values = server_values(cfg, g, s, lam_g)
    host = host_name(g, s)
    devices = [f"{lun_name(i)};".encode() for i in range(cfg["luns"])]
    ends = START_S + 1 + np.arange(cfg["seconds"])
    if cfg["date_timestamps"]:
        text = np.datetime_as_string(ends.astype("datetime64[s]"))
        stamps = [x.replace("T", " ") + " UTC" for x in text]
    else:
        stamps = [str(x) for x in ends]
    prefix = [f"{host};1;{x};".encode() for x in stamps]
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb") as f:
        f.write(HEADER)
        for a in range(0, cfg["seconds"], 3600):
            f.write(rows_bytes(prefix[a : a + 3600], devices, values[a : a + 3600]))
    tmp.rename(path)
    return path.stat().st_size


def generate(cfg: dict[str, Any], root: Path) -> list[Path]:
    """The set's files, written unless ``manifest.json`` matches ``cfg`` and sizes agree."""
    manifest = root / "manifest.json"
    files = [
        root / f"{host_name(g, s)}.csv" for g in range(cfg["groups"]) for s in range(cfg["servers"])
    ]
    if manifest.exists():
        old = json.loads(manifest.read_text())
        if old["config"] == json.loads(json.dumps(cfg)) and all(
            p.exists() and p.stat().st_size == old["sizes"].get(p.name) for p in files
        ):
            return files
    root.mkdir(parents=True, exist_ok=True)
    rows = cfg["groups"] * cfg["servers"] * cfg["luns"] * cfg["seconds"]
    need = rows * 95
    free = shutil.disk_usage(root).free
    if need > free - (2 << 30):
        raise SystemExit(f"need ~{need / 1e9:.1f} GB in {root}, {free / 1e9:.1f} GB free")
    print(f"generating {len(files)} files, {rows:,} rows (~{need / 1e9:.1f} GB) in {root}")
    t0 = time.monotonic()
    jobs = [(g, s) for g in range(cfg["groups"]) for s in range(cfg["servers"])]
    with ProcessPoolExecutor(max_workers=2) as pool:
        sizes = list(pool.map(write_server, [cfg] * len(jobs), *zip(*jobs, strict=True), files))
    manifest.write_text(
        json.dumps({"config": cfg, "sizes": {p.name: n for p, n in zip(files, sizes, strict=True)}})
    )
    print(f"generated {sum(sizes) / 1e9:.2f} GB in {time.monotonic() - t0:.0f} s")
    return files


def groups_of(cfg: dict[str, Any]) -> dict[str, str]:
    return {f"fs{g:02d}-*:*": f"pg{g:02d}" for g in range(cfg["groups"])}


# -- stages (child processes) ----------------------------------------------------------------


def stage_ingest(root: Path) -> dict[str, Any]:
    from pipeline.jobs.peer_fast import downsample_files

    files = sorted(root.glob("fs*.csv"))
    ds = downsample_files(files, 15.0)
    full = np.abs(ds.interval_s - 15.0) <= 1e-6 * 15.0
    out = root / "downsampled"
    out.mkdir(exist_ok=True)
    np.save(out / "lun.npy", ds.lun[full])
    np.save(out / "end_s.npy", ds.end_s[full])
    np.save(out / "interval_s.npy", ds.interval_s[full])
    # (8, n) on disk, written a column at a time; read back as its (n, 8) transpose
    values = np.lib.format.open_memmap(out / "values.npy", "w+", np.float64, (8, int(full.sum())))
    for k in range(8):
        values[k] = ds.values[full, k]
    values.flush()
    del values
    (out / "luns.json").write_text(json.dumps(ds.luns))
    rows = sum(p.stat().st_size for p in files)
    return {"samples_out": int(full.sum()), "partial": int((~full).sum()), "bytes": rows}


def recording(root: Path) -> Any:
    from pipeline.formats.sysstat.downsample_columns import Downsampled, by_lun
    from pipeline.jobs.peer_recording import Recording

    d = root / "downsampled"
    ds = Downsampled(
        [tuple(x) for x in json.loads((d / "luns.json").read_text())],
        np.load(d / "lun.npy", mmap_mode="r"),
        np.load(d / "end_s.npy", mmap_mode="r"),
        np.load(d / "interval_s.npy", mmap_mode="r"),
        np.load(d / "values.npy", mmap_mode="r").T,
    )
    return Recording(by_lun(ds, 15.0), 15.0, 0)


def stage_train(root: Path, cfg: dict[str, Any]) -> dict[str, Any]:
    from pipeline.jobs.peer_diagnosis import train
    from pipeline.reducers.peer_params import PeerParams

    rec = recording(root)
    thr = train(rec, ["await"], groups_of(cfg), PeerParams(), until_s=cfg["train_until_s"])
    (root / "thresholds.json").write_text(json.dumps(thr.to_dict()))
    return {}


def stage_diagnose(root: Path, cfg: dict[str, Any]) -> dict[str, Any]:
    from pipeline.jobs.peer_diagnosis import diagnose
    from pipeline.reducers.peer_params import PeerParams
    from pipeline.reducers.peer_thresholds import Thresholds
    from pipeline.reducers.persistence import hourly_rows, qualified_name

    rec = recording(root)
    thr = Thresholds.from_dict(json.loads((root / "thresholds.json").read_text()))
    t0 = time.monotonic()
    results = diagnose(rec, "await", groups_of(cfg), PeerParams(), thr, cfg["train_until_s"])
    t1 = time.monotonic()
    rows = list(hourly_rows(results, 10))
    t2 = time.monotonic()
    faulty = sorted({qualified_name(r.group, x) for r in results for x in r.faulty})
    return {
        "diagprep_s": t1 - t0,
        "ordering_s": t2 - t1,
        "windows": len(results),
        "faulty": faulty,
        "last_hour": rows[-1].format() if rows else "",
    }


# -- driver ----------------------------------------------------------------------------------


def run_stage(name: str, root: Path, cfg_path: Path) -> dict[str, Any]:
    """One stage in a child process: wall, peak RSS, CPU, and what it returned."""
    result = root / f"stage-{name}.json"
    argv = [sys.executable, __file__, "--stage", name, "--set", str(root), "--cfg", str(cfg_path)]
    t0 = time.monotonic()
    proc = subprocess.Popen(argv)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"stage {name} failed ({proc.returncode})")
    return {
        "wall_s": wall,
        "peak_rss_bytes": usage.ru_maxrss * 1024,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        **json.loads(result.read_text()),
    }


def human_s(s: float) -> str:
    return f"{s / 3600:.1f} h" if s >= 3600 else f"{s / 60:.1f} m" if s >= 600 else f"{s:.1f} s"


def human_b(b: float) -> str:
    return f"{b / 2**30:.2f} GiB" if b >= 2**30 else f"{b / 2**20:.0f} MiB"


def report(cfg: dict[str, Any], stages: dict[str, dict[str, Any]], files: list[Path]) -> str:
    luns = cfg["groups"] * cfg["servers"] * cfg["luns"]
    scale = luns / 144
    ing, tr, dg = stages["ingest"], stages["train"], stages["diagnose"]
    total_wall = ing["wall_s"] + tr["wall_s"] + dg["wall_s"]
    total_rss = max(ing["peak_rss_bytes"], tr["peak_rss_bytes"], dg["peak_rss_bytes"])
    rows = [
        (
            "dump + table (ingest: parse, downsample 1 s -> 15 s)",
            ["dump", "table"],
            ing["wall_s"],
            ing["peak_rss_bytes"],
        ),
        ("training (thresholds, fault-free hours)", [], tr["wall_s"], tr["peak_rss_bytes"]),
        (
            "diagprep (peer comparison of await, after training)",
            ["diagprep"],
            dg["wall_s"] - dg["ordering_s"],
            dg["peak_rss_bytes"],
        ),
        ("diagnose (persistence ordering, in-process)", ["diagnose"], dg["ordering_s"], None),
        ("total", ["total"], total_wall, total_rss),
    ]
    size = sum(p.stat().st_size for p in files)
    out = [
        f"{cfg['groups']} peer groups x {cfg['servers']} servers x {cfg['luns']} LUNs = {luns} "
        f"LUNs, {cfg['seconds'] / 3600:g} h of 1 s samples: {luns * cfg['seconds']:,} rows, "
        f"{size / 1e9:.2f} GB of sadf -d CSV in {len(files)} files "
        f"({ing['samples_out']:,} full 15 s samples out)",
        "",
        "| step | seed (4 groups, 144 LUNs) | iolens wall | iolens peak RSS | seed/iolens time "
        f"| per LUN: seed/iolens time (x{scale:g} LUNs) |",
        "|---|---|---|---|---|---|",
    ]
    for label, keys, wall, rss in rows:
        seed_s = sum(SEED_TABLE[k][0] for k in keys)
        seed_b = max((SEED_TABLE[k][1] for k in keys), default=0.0)
        seed = f"{human_s(seed_s)} / {human_b(seed_b)}" if keys else "(part of diagprep)"
        ratio = f"{seed_s / wall:,.0f}x" if keys and wall > 0 else ""
        per_lun = f"{seed_s * scale / wall:,.0f}x" if keys and wall > 0 else ""
        rss_text = human_b(rss) if rss is not None else "(in diagnose)"
        out.append(f"| {label} | {seed} | {human_s(wall)} | {rss_text} | {ratio} | {per_lun} |")
    injected = sorted(f"pg{g:02d}:{host_name(g, s)}/{lun_name(i)}" for g, s, i in cfg["faults"])
    found = dg["faulty"]
    out += [
        "",
        f"injected await x{FAULT_MULT:g} faults: {', '.join(injected)}",
        f"indicted (faulty in any window after training): {', '.join(found) or '(none)'}",
        f"missed: {sorted(set(injected) - set(found)) or 'none'}; "
        f"others indicted: {sorted(set(found) - set(injected)) or 'none'}",
        f"last hourly row: {dg['last_hour']}",
    ]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 groups x 4 h (a smoke run)")
    ap.add_argument("--groups", type=int, default=32)
    ap.add_argument("--servers", type=int, default=4, help="servers per peer group")
    ap.add_argument("--luns", type=int, default=9, help="LUNs per server")
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--epoch", action="store_true", help="sadf -U timestamps (Unix seconds)")
    ap.add_argument("--stage", choices=("ingest", "train", "diagnose"), help=argparse.SUPPRESS)
    ap.add_argument("--set", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--cfg", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.stage:
        cfg = json.loads(args.cfg.read_text())
        res = {
            "ingest": lambda: stage_ingest(args.set),
            "train": lambda: stage_train(args.set, cfg),
            "diagnose": lambda: stage_diagnose(args.set, cfg),
        }[args.stage]()
        (args.set / f"stage-{args.stage}.json").write_text(json.dumps(res))
        return 0
    cfg = config(args)
    name = f"{cfg['groups']}x{cfg['servers']}x{cfg['luns']}-{cfg['seconds']}s"
    name += "-epoch" if args.epoch else ""
    root = OUT / name
    files = generate(cfg, root)
    cfg_path = root / "cfg.json"
    cfg_path.write_text(json.dumps(cfg))
    stages = {}
    for stage in ("ingest", "train", "diagnose"):
        stages[stage] = run_stage(stage, root, cfg_path)
        s = stages[stage]
        print(
            f"{stage}: {s['wall_s']:.1f} s wall, {s['cpu_s']:.1f} s CPU, "
            f"{human_b(s['peak_rss_bytes'])} peak RSS",
            flush=True,
        )
    text = report(cfg, stages, files)
    print(text)
    (root / "results.md").write_text(text + "\n")
    (root / "results.json").write_text(json.dumps({"config": cfg, "stages": stages}, indent=1))
    return 0 if math.isfinite(stages["ingest"]["wall_s"]) else 1


if __name__ == "__main__":
    sys.exit(main())
