"""Decoding a chunk of event lines into columns: which JSON reader, side by side.

A request join on a chunk's columns (rather than event by event) needs each chunk of an
``events`` drop as columns: timestamps (int64), event-type codes and, per join attribute of the
schema, an array of interned value ids (-1 where the event has no such attribute). This measures
what that decoding costs per event with each reader, in one run, on the same chunks, against
what the event path does today (``parse_event_line``: orjson per line, one ``Event`` each):

* **events** (today): ``parse_event_line`` per line, an ``Event`` object each;
* **orjson lines**: ``orjson.loads`` per line, columns filled from the dicts;
* **orjson chunk**: the chunk's lines joined into one JSON array, one ``orjson.loads``;
* **msgspec**: one ``msgspec.json.Decoder`` of a list of ``Struct`` with the schema's
  attributes as fields (others ignored), the chunk as one array;
* **pyarrow**: ``pyarrow.json.read_json`` of the chunk (newline-delimited), join attributes
  dictionary-encoded, the chunk's dictionary mapped to the run's ids.

Each reader decodes the same 4 MiB chunks (what a tail reads at once) of the log
``bench/requests.py`` writes (real events of the test server, multiplied), and the columns of
every reader are checked equal to those of the first. Readers not installed are skipped. CPU
time per event (``time.process_time``), best of ``--rounds``; the ratio is today's cost over the
reader's.

Usage::

    .venv/bin/python bench/event_decode.py                 # 1,000,000 events
    .venv/bin/python bench/event_decode.py --events 200000 --rounds 5
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import yaml
from rich.console import Console
from rich.table import Table

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
SCHEMA = ROOT / "config" / "schemas" / "http_server.yaml"
CHUNK_BYTES = 4 << 20
console = Console(width=140)


@dataclass
class Columns:
    """A chunk's events as columns: ``ts`` (ns), ``ev`` (event type code, -1: unknown type),
    and per join attribute the interned id of its value (-1: absent)."""

    ts: np.ndarray
    ev: np.ndarray
    ids: dict[str, np.ndarray]

    def same(self, other: Columns) -> bool:
        """Equal arrays, attribute by attribute."""
        return (
            np.array_equal(self.ts, other.ts)
            and np.array_equal(self.ev, other.ev)
            and self.ids.keys() == other.ids.keys()
            and all(np.array_equal(self.ids[k], other.ids[k]) for k in self.ids)
        )


class Interner:
    """Value -> id of one attribute over a whole run, in order of first appearance (the ids
    the join keys on)."""

    def __init__(self) -> None:
        self.ids: dict[Any, int] = {}

    def __call__(self, v: Any) -> int:
        got = self.ids.get(v)
        if got is None:
            got = self.ids[v] = len(self.ids)
        return got


class Reader:
    """One way of decoding a chunk into :class:`Columns` (a fresh interner per run)."""

    def __init__(self, types: Sequence[str], attrs: Sequence[str]) -> None:
        self.codes = {t: i for i, t in enumerate(types)}
        self.attrs = tuple(attrs)
        self.interns = {a: Interner() for a in self.attrs}

    def columns_of(self, objs: Sequence[dict[str, Any]]) -> Columns:
        """Columns from decoded JSON objects."""
        codes = self.codes
        ts = np.fromiter((o["ts"] for o in objs), np.int64, len(objs))
        ev = np.fromiter((codes.get(o["ev"], -1) for o in objs), np.int32, len(objs))
        ids = {}
        for a in self.attrs:
            intern = self.interns[a]
            ids[a] = np.fromiter(
                (-1 if (v := o.get(a)) is None else intern(v) for o in objs), np.int64, len(objs)
            )
        return Columns(ts, ev, ids)

    def decode(self, lines: Sequence[bytes]) -> Columns | Callable[[], Columns]:
        """The chunk's columns (or what makes them, untimed: today's path has none)."""
        raise NotImplementedError


class Events(Reader):
    """Today's path: an ``Event`` per line; the columns are made from them after the timing,
    for the check only."""

    def decode(self, lines: Sequence[bytes]) -> Callable[[], Columns]:
        from pipeline.formats.events.decode import parse_event_line

        events = [parse_event_line(raw, "bench", n) for n, raw in enumerate(lines, 1)]
        return lambda: self.columns_of([{"ts": e.ts_ns, "ev": e.ev, **e.attrs} for e in events])


class OrjsonLines(Reader):
    def decode(self, lines: Sequence[bytes]) -> Columns:
        return self.columns_of([orjson.loads(raw) for raw in lines])


class OrjsonChunk(Reader):
    def decode(self, lines: Sequence[bytes]) -> Columns:
        return self.columns_of(orjson.loads(b"[" + b",".join(lines) + b"]"))


class Msgspec(Reader):
    def __init__(self, types: Sequence[str], attrs: Sequence[str]) -> None:
        super().__init__(types, attrs)
        import msgspec

        fields = [("ts", int), ("ev", str)] + [(a, Any, None) for a in self.attrs]
        struct = msgspec.defstruct("Ev", fields)
        self._decoder = msgspec.json.Decoder(list[struct])  # type: ignore[valid-type]

    def decode(self, lines: Sequence[bytes]) -> Columns:
        objs: list[Any] = self._decoder.decode(b"[" + b",".join(lines) + b"]")
        codes = self.codes
        n = len(objs)
        ts = np.fromiter((o.ts for o in objs), np.int64, n)
        ev = np.fromiter((codes.get(o.ev, -1) for o in objs), np.int32, n)
        ids = {}
        for a in self.attrs:
            get, intern = _getter(a), self.interns[a]
            ids[a] = np.fromiter(
                (-1 if (v := get(o)) is None else intern(v) for o in objs), np.int64, n
            )
        return Columns(ts, ev, ids)


def _getter(name: str) -> Callable[[Any], Any]:
    import operator

    return operator.attrgetter(name)


class Arrow(Reader):
    def __init__(self, types: Sequence[str], attrs: Sequence[str]) -> None:
        super().__init__(types, attrs)
        import pyarrow as pa  # type: ignore[import-untyped]
        import pyarrow.compute as pc  # type: ignore[import-untyped]
        import pyarrow.json as pj  # type: ignore[import-untyped]

        self._pa, self._pc, self._pj = pa, pc, pj

    def decode(self, lines: Sequence[bytes]) -> Columns:
        pa, pc, pj = self._pa, self._pc, self._pj
        data = b"\n".join(lines) + b"\n"
        opts = pj.ReadOptions(block_size=len(data) + 1, use_threads=False)
        table = pj.read_json(pa.BufferReader(data), read_options=opts)
        ts = table.column("ts").to_numpy().astype(np.int64, copy=False)
        ev_dict = pc.dictionary_encode(table.column("ev")).combine_chunks()
        lut = np.array([self.codes.get(t, -1) for t in ev_dict.dictionary.to_pylist()], np.int32)
        ev = lut[ev_dict.indices.to_numpy()]
        ids = {}
        for a in self.attrs:
            if a not in table.column_names:
                ids[a] = np.full(len(ts), -1, np.int64)
                continue
            enc = pc.dictionary_encode(table.column(a)).combine_chunks()
            intern = self.interns[a]
            lut64 = np.array([intern(v) for v in enc.dictionary.to_pylist()] + [-1], np.int64)
            idx = enc.indices.fill_null(-1).to_numpy()
            ids[a] = lut64[idx]
        return Columns(ts, ev, ids)


READERS: dict[str, type[Reader]] = {
    "events (today)": Events,
    "orjson lines": OrjsonLines,
    "orjson chunk": OrjsonChunk,
    "msgspec": Msgspec,
    "pyarrow": Arrow,
}


def chunks_of(path: Path) -> list[list[bytes]]:
    """The log's lines in ``CHUNK_BYTES`` chunks."""
    out: list[list[bytes]] = [[]]
    size = 0
    for line in path.read_bytes().splitlines():
        if size >= CHUNK_BYTES:
            out.append([])
            size = 0
        out[-1].append(line)
        size += len(line) + 1
    return out


def make_log(n: int) -> Path:
    """The log ``bench/requests.py`` writes: real events of the test server, multiplied."""
    spec = importlib.util.spec_from_file_location("bench_requests", BENCH_DIR / "requests.py")
    assert spec is not None and spec.loader is not None
    sys.path.insert(0, str(BENCH_DIR))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.OUT_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        base = mod.record(Path(tmp), False)
    path: Path = mod.OUT_DIR / f"decode-{n}.jsonl"
    mod.multiply(base, n, path)
    return path


def main(argv: list[str] | None = None) -> int:
    """Decode the log with every reader; print CPU per event and the ratio to today's."""
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--events", type=int, default=1_000_000, help="events in the log")
    p.add_argument("--rounds", type=int, default=3, help="runs per reader (the best)")
    args = p.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    schema = yaml.safe_load(SCHEMA.read_text())
    types = sorted(schema["events"])
    attrs = sorted({a for t in schema["events"].values() for a in (t.get("attrs") or {})})
    path = make_log(args.events)
    chunks = chunks_of(path)
    n = sum(len(c) for c in chunks)
    console.log(f"{n:,} events in {len(chunks)} chunks; join attributes {', '.join(attrs)}")
    results: dict[str, float] = {}
    first: list[Columns] | None = None
    for name, cls in READERS.items():
        try:
            cls(types, attrs)
        except ImportError as err:
            console.log(f"{name}: skipped ({err})")
            continue
        best = float("inf")
        for _ in range(args.rounds):
            reader = cls(types, attrs)
            start = time.process_time()
            made = [reader.decode(c) for c in chunks]
            best = min(best, time.process_time() - start)
            cols = [c() if callable(c) else c for c in made]
        if first is None:
            first = cols
        elif not all(a.same(b) for a, b in zip(first, cols, strict=True)):
            raise SystemExit(f"{name}: columns differ from those of {next(iter(results))}")
        results[name] = best
    table = Table(title=f"decoding {n:,} events into columns (CPU, best of {args.rounds})")
    for col in ("reader", "us/event", "today / reader"):
        table.add_column(col, justify="right")
    today = results["events (today)"]
    for name, s in results.items():
        table.add_row(name, f"{s / n * 1e6:.2f}", f"{today / s:.2f}x")
    console.print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
