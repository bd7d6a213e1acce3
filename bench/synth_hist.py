"""Benchmark inputs: fio 3.33 histogram logs, real and synthesized from the real ones.

The real logs (``../shared/data/fio/randrw_clat_hist.{1..4}.log.gz`` beside the repository, run A of
reference/fio.md section 4) have 1,859 fields per line and a read and a write record every
~100 ms, times in ms since the job start::

    101, 0, 4096, 0, 0, ..., 0, 3, 17, 52, ..., 0
    101, 1, 4096, 0, 0, ..., 0, 1, 6, 21, ..., 0
    201, 0, 4096, ...
    202, 1, 4096, ...

Synthetic sets follow reference/fio.md section 5.1: file i, 100-ms step k = 1..10*S gets a read
row at ``t = 100k + 1 + phase_i`` (``phase_i`` uniform in 0-3 ms, fixed per file) and a write row
at t, or t + 1 in 10% of steps; its bins are ``Poisson(template * u)``, where the template is the
same-direction row ``k mod 99`` of real file ``i mod 4`` and ``u ~ U(0.9, 1.1)`` is drawn once
per row (a load factor). Each file has its own seeded numpy generator, so a set is reproducible
and independent of the order files are written in.

A set is written to ``bench/out/<name>/`` with a ``manifest.json`` (parameters and file sizes);
:func:`ensure_set` reuses a directory whose manifest matches and whose files have those sizes.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from fio_lines import encode_rows

I64 = npt.NDArray[np.int64]

REAL_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "fio"
REAL_LOGS = tuple(REAL_DIR / f"randrw_clat_hist.{i}.log.gz" for i in range(1, 5))
STEP_MS = 100
TEMPLATE_ROWS = 99  # rows per direction in every real log (file 4 has one extra read row)
WRITE_LATE_FRACTION = 0.1
MAX_PHASE_MS = 3
LOAD_FACTOR = (0.9, 1.1)
STEPS_PER_BLOCK = 1000
FORMAT_VERSION = 1  # bump when the generator changes, to invalidate cached sets
MANIFEST = "manifest.json"


@dataclass(frozen=True)
class SetSpec:
    """One input set: ``files`` logs of ``seconds`` each; ``real`` means the four real logs."""

    files: int
    seconds: int
    seed: int = 1
    real: bool = False

    @property
    def name(self) -> str:
        """Directory name under ``bench/out`` and table label stem."""
        return (
            f"real{self.files}x{self.seconds}" if self.real else f"synth{self.files}x{self.seconds}"
        )

    @property
    def label(self) -> str:
        """Short label for tables, e.g. ``8 x 30 s`` or ``4 x 10 s real``."""
        return f"{self.files} x {self.seconds} s" + (" real" if self.real else "")


REAL_SET = SetSpec(files=4, seconds=10, seed=0, real=True)


@dataclass(frozen=True)
class Template:
    """The read and write rows of one real log, ``(99, 1859)`` int64 each, in time order.

    ``active`` lists the columns (>= 3) that are non-zero in any row: Poisson(0) is 0, so only
    these need sampling.
    """

    reads: I64
    writes: I64
    active: npt.NDArray[np.intp]


@dataclass(frozen=True)
class DataSet:
    """A generated (or copied) set on disk: its spec, files in command-line order, totals."""

    spec: SetSpec
    paths: tuple[Path, ...]
    rows: int
    bytes: int


def load_template(path: Path) -> Template:
    """Read one real ``.log.gz`` into its first 99 read and 99 write rows."""
    with gzip.open(path, "rb") as fh:
        rows = np.loadtxt(fh, delimiter=",", dtype=np.int64)
    reads = rows[rows[:, 1] == 0][:TEMPLATE_ROWS]
    writes = rows[rows[:, 1] == 1][:TEMPLATE_ROWS]
    if len(reads) < TEMPLATE_ROWS or len(writes) < TEMPLATE_ROWS:
        raise ValueError(f"{path}: need {TEMPLATE_ROWS} read and write rows")
    active = 3 + np.flatnonzero((rows[:, 3:] != 0).any(axis=0))
    return Template(reads=reads, writes=writes, active=active)


def synth_block(tpl: Template, steps: I64, phase_ms: int, rng: np.random.Generator) -> I64:
    """Rows for 100-ms ``steps`` (read, write, read, write, ...), shape ``(2 * len(steps), F)``."""
    n = len(steps)
    src = steps % TEMPLATE_ROWS
    rows = np.empty((2 * n, tpl.reads.shape[1]), dtype=np.int64)
    rows[0::2] = tpl.reads[src]
    rows[1::2] = tpl.writes[src]
    t = STEP_MS * steps + 1 + phase_ms
    rows[0::2, 0] = t
    rows[1::2, 0] = t + (rng.random(n) < WRITE_LATE_FRACTION)
    lam = rows[:, tpl.active] * rng.uniform(*LOAD_FACTOR, size=(2 * n, 1))
    rows[:, tpl.active] = rng.poisson(lam)
    return rows


def synth_rows(tpl: Template, spec: SetSpec, index: int) -> Iterator[I64]:
    """Blocks of rows of file ``index`` of ``spec``, in time order."""
    rng = np.random.default_rng([spec.seed, spec.files, spec.seconds, index])
    phase_ms = int(rng.integers(0, MAX_PHASE_MS + 1))
    total = spec.seconds * 1000 // STEP_MS
    for first in range(1, total + 1, STEPS_PER_BLOCK):
        steps = np.arange(first, min(first + STEPS_PER_BLOCK, total + 1), dtype=np.int64)
        yield synth_block(tpl, steps, phase_ms, rng)


def write_synth_file(spec: SetSpec, index: int, path: Path) -> tuple[int, int]:
    """Generate file ``index`` of ``spec`` to ``path``; returns ``(rows, bytes)``."""
    tpl = load_template(REAL_LOGS[index % len(REAL_LOGS)])
    rows = 0
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as fh:
        for block in synth_rows(tpl, spec, index):
            fh.write(encode_rows(block))
            rows += len(block)
    tmp.replace(path)
    return rows, path.stat().st_size


def copy_real_file(index: int, path: Path) -> tuple[int, int]:
    """Gunzip real log ``index`` to ``path``; returns ``(rows, bytes)``."""
    tmp = path.with_suffix(".tmp")
    with gzip.open(REAL_LOGS[index], "rb") as src, open(tmp, "wb") as dst:
        shutil.copyfileobj(src, dst)
    tmp.replace(path)
    with open(path, "rb") as fh:
        rows = sum(1 for _ in fh)
    return rows, path.stat().st_size


def file_name(spec: SetSpec, index: int) -> str:
    """``randrw_clat_hist.<i>.log`` (real, i from 1) or ``synth_clat_hist.<i>.log`` (from 0)."""
    return f"randrw_clat_hist.{index + 1}.log" if spec.real else f"synth_clat_hist.{index}.log"


def _make_file(spec: SetSpec, index: int, path: Path) -> tuple[int, int]:
    """One file of a set (top-level so that a process pool can run it)."""
    return copy_real_file(index, path) if spec.real else write_synth_file(spec, index, path)


def _read_manifest(directory: Path) -> dict[str, Any] | None:
    """The manifest of ``directory``, or None if it has none."""
    try:
        manifest: dict[str, Any] = json.loads((directory / MANIFEST).read_text())
    except FileNotFoundError:
        return None
    return manifest


def _cached(spec: SetSpec, directory: Path) -> DataSet | None:
    """The set in ``directory`` if its manifest matches ``spec`` and every file has its size."""
    manifest = _read_manifest(directory)
    if manifest is None or manifest.get("spec") != asdict(spec):
        return None
    if manifest.get("format_version") != FORMAT_VERSION:
        return None
    sizes: dict[str, int] = manifest["sizes"]
    paths = tuple(directory / file_name(spec, i) for i in range(spec.files))
    for p in paths:
        if not p.is_file() or p.stat().st_size != sizes.get(p.name):
            return None
    return DataSet(spec, paths, int(manifest["rows"]), sum(sizes.values()))


def ensure_set(
    spec: SetSpec,
    out_dir: Path,
    *,
    workers: int | None = None,
    on_file: Callable[[int, int], None] = lambda done, total: None,
) -> DataSet:
    """Generate ``spec`` under ``out_dir/<name>`` unless a matching copy is already there.

    Args:
        spec: what to generate.
        out_dir: ``bench/out``.
        workers: processes used to write files in parallel (default: CPU count).
        on_file: progress callback ``(files_done, files_total)``.

    Returns:
        The set's files (in command-line order: by index) and totals.

    Raises:
        ValueError: ``spec.real`` with a size other than the real logs' 4 x 10 s.
    """
    if spec.real and (spec.files, spec.seconds) != (REAL_SET.files, REAL_SET.seconds):
        raise ValueError("the real set is 4 files x 10 s")
    directory = out_dir / spec.name
    cached = _cached(spec, directory)
    if cached is not None:
        return cached
    directory.mkdir(parents=True, exist_ok=True)
    (directory / MANIFEST).unlink(missing_ok=True)
    paths = tuple(directory / file_name(spec, i) for i in range(spec.files))
    results: list[tuple[int, int]] = []
    with ProcessPoolExecutor(max_workers=workers or os.cpu_count()) as pool:
        futures = [pool.submit(_make_file, spec, i, p) for i, p in enumerate(paths)]
        for done, fut in enumerate(futures, start=1):
            results.append(fut.result())
            on_file(done, len(paths))
    rows = sum(r for r, _ in results)
    manifest = {
        "spec": asdict(spec),
        "format_version": FORMAT_VERSION,
        "rows": rows,
        "sizes": {p.name: size for p, (_, size) in zip(paths, results, strict=True)},
    }
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return DataSet(spec, paths, rows, sum(s for _, s in results))
