"""ChunkHolds.release counts a read's released lines at once, as releasing them one by one
would: the same chunks released in the same order, the same chunks kept (a line in no chunk
is refused before anything is counted)."""

from __future__ import annotations

from bisect import bisect_right

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.records.core import LineRef
from pipeline.reducers.line_holds import ChunkHolds


class OneByOne:
    """The release counted line by line (how ChunkHolds first did it)."""

    def __init__(self, chunks: list[tuple[int, int, int]]) -> None:
        self.first = [a for a, _b, _n in chunks]
        self.last = [b for _a, b, _n in chunks]
        self.left = [n for _a, _b, n in chunks]

    def release(self, lines: list[int]) -> list[int]:
        out = []
        for n in lines:
            i = bisect_right(self.first, n) - 1
            self.left[i] -= 1
            if not self.left[i]:
                out.append(self.last[i] * 10)
        if not out:
            return out
        keep = [i for i, n in enumerate(self.left) if n]
        self.first = [self.first[i] for i in keep]
        self.last = [self.last[i] for i in keep]
        self.left = [self.left[i] for i in keep]
        return out


@st.composite
def reads(draw: st.DrawFn) -> tuple[list[tuple[int, int, int]], list[list[int]]]:
    """Chunks (first line, last line, lines held) and the lines released, in batches."""
    chunks = []
    line = 1
    for _ in range(draw(st.integers(1, 6))):
        size = draw(st.integers(1, 8))
        chunks.append((line, line + size - 1, draw(st.integers(1, size))))
        line += size + draw(st.integers(0, 2))  # lines that held nothing lie between
    held = [n for a, _b, k in chunks for n in range(a, a + k)]
    order = draw(st.permutations(held))
    cuts = sorted(draw(st.lists(st.integers(0, len(order)), max_size=4)))
    batches = [order[a:b] for a, b in zip([0, *cuts], [*cuts, len(order)], strict=True)]
    return chunks, batches


def holds_of(chunks: list[tuple[int, int, int]]) -> ChunkHolds:
    holds = ChunkHolds()
    for a, b, n in chunks:
        holds.open(a, LineRef("k", "p", b, b * 10))
        holds.close(n)
    return holds


@given(reads())
@settings(max_examples=300, deadline=None)
def test_a_read_of_releases_is_counted_as_one_by_one(case: tuple) -> None:
    chunks, batches = case
    holds, ref = holds_of(chunks), OneByOne(chunks)
    for batch in batches:
        assert holds.release(batch) == ref.release(batch)
        assert len(holds) == len(ref.left)
    assert len(holds) == 0


def test_a_chunk_is_released_by_its_last_line_in_the_order_given() -> None:
    holds = holds_of([(1, 3, 2), (4, 6, 3), (7, 9, 1)])
    assert holds.release([4, 1, 7, 5, 3, 6]) == [90, 30, 60]
    assert len(holds) == 0


def test_a_chunk_still_open_is_kept_when_nothing_is_released() -> None:
    holds = ChunkHolds()
    holds.open(1, LineRef("k", "p", 2, 20))
    holds.close(2)
    holds.open(3, LineRef("k", "p", 7, 70))  # being read: not closed yet
    assert holds.release([1]) == []
    holds.close(1)
    assert holds.release([3]) == [70]
    assert holds.release([2]) == [20]
    assert len(holds) == 0


def test_a_line_in_no_chunk_changes_nothing() -> None:
    holds = holds_of([(1, 3, 2), (6, 8, 1)])
    with pytest.raises(KeyError, match="line 4 is in no chunk held"):
        holds.release([1, 4])
    with pytest.raises(KeyError, match="line 0 is in no chunk held"):
        holds.release([0])
    assert holds.release([1, 6, 3]) == [80, 30]
