from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.delivery.acks import AckTracker


def test_in_order_acks() -> None:
    t = AckTracker()
    t.track("f", 1, 10, 2)
    t.track("f", 2, 25, 1)
    assert t.outstanding("f") == 3
    assert t.committable("f") is None
    t.ack("f", 10)
    assert t.committable("f") is None
    t.ack("f", 10)
    assert t.committable("f") == (10, 1)
    assert t.committable("f") is None  # popped
    t.ack("f", 25)
    assert t.committable("f") == (25, 2)
    assert t.outstanding("f") == 0
    assert t.pending_lines("f") == 0


def test_out_of_order_acks_wait_for_the_prefix() -> None:
    t = AckTracker()
    t.track("f", 1, 10, 1)
    t.track("f", 2, 20, 1)
    t.track("f", 3, 30, 1)
    t.ack("f", 30)
    t.ack("f", 20)
    assert t.committable("f") is None
    t.ack("f", 10)
    assert t.committable("f") == (30, 3)


def test_zero_doc_lines_settle_at_once() -> None:
    t = AckTracker()
    t.track("f", 1, 5, 0)
    t.track("f", 2, 9, 0)
    t.track("f", 3, 14, 1)
    assert t.committable("f") == (9, 2)
    t.track("f", 4, 20, 0)
    assert t.committable("f") is None
    t.ack("f", 14)
    assert t.committable("f") == (20, 4)


def test_files_are_independent() -> None:
    t = AckTracker()
    t.track("a", 1, 10, 1)
    t.track("b", 1, 10, 1)
    t.ack("b", 10)
    assert t.committable("a") is None
    assert t.committable("b") == (10, 1)
    assert t.outstanding("a") == 1
    assert t.committable("unknown") is None
    assert t.outstanding("unknown") == 0


def test_errors() -> None:
    t = AckTracker()
    t.track("f", 1, 10, 1)
    with pytest.raises(ValueError, match="not after"):
        t.track("f", 1, 20, 1)
    with pytest.raises(ValueError, match="not after"):
        t.track("f", 2, 10, 1)
    with pytest.raises(ValueError, match="n_docs"):
        t.track("f", 2, 20, -1)
    with pytest.raises(KeyError):
        t.ack("f", 11)
    with pytest.raises(KeyError):
        t.ack("g", 10)
    t.ack("f", 10)
    with pytest.raises(ValueError, match="more often"):
        t.ack("f", 10)
    assert t.committable("f") == (10, 1)
    with pytest.raises(KeyError):
        t.ack("f", 10)  # already committed


def test_forget_allows_restart_at_zero() -> None:
    t = AckTracker()
    t.track("f", 1, 10, 1)
    t.forget("f")
    with pytest.raises(KeyError):
        t.ack("f", 10)
    t.track("f", 1, 4, 1)
    t.ack("f", 4)
    assert t.committable("f") == (4, 1)


@st.composite
def lines_and_ack_order(draw: st.DrawFn) -> tuple[list[int], list[int]]:
    """Doc counts per line, and a permutation of all their acks (as line indices)."""
    n_docs = draw(st.lists(st.integers(min_value=0, max_value=4), min_size=1, max_size=20))
    acks = [i for i, n in enumerate(n_docs) for _ in range(n)]
    order = draw(st.permutations(acks))
    return n_docs, list(order)


@given(lines_and_ack_order(), st.lists(st.booleans(), min_size=0, max_size=100))
def test_committable_never_passes_an_unsettled_line(
    case: tuple[list[int], list[int]], polls: list[bool]
) -> None:
    n_docs, order = case
    ends = [(i + 1) * 10 for i in range(len(n_docs))]
    t = AckTracker()
    for i, n in enumerate(n_docs):
        t.track("f", i + 1, ends[i], n)
    remaining = list(n_docs)
    committed_line = 0
    poll = iter(polls)

    def check() -> None:
        nonlocal committed_line
        got = t.committable("f")
        if got is None:
            # nothing new: the line after the committed prefix is unsettled (or there is none)
            assert committed_line == len(n_docs) or remaining[committed_line] > 0
            return
        end, line_no = got
        assert end == ends[line_no - 1]
        assert line_no > committed_line
        # every line up to it is settled, and the prefix is maximal
        assert all(r == 0 for r in remaining[:line_no])
        assert line_no == len(n_docs) or remaining[line_no] > 0
        committed_line = line_no

    for i in order:
        t.ack("f", ends[i])
        remaining[i] -= 1
        assert t.outstanding("f") == sum(remaining)
        if next(poll, False):
            check()
    check()
    assert committed_line == len(n_docs)
    assert t.outstanding("f") == 0
    assert t.committable("f") is None


def test_a_hold_makes_a_line_wait_for_one_more_acknowledgement() -> None:
    t = AckTracker()
    t.track("f", 1, 10, 1)  # an event line, held by an open request
    t.track("f", 2, 20, 1)
    t.hold("f", 10)  # the request's document derives from both lines
    t.hold("f", 20)
    t.ack("f", 10)  # the request let go of its lines...
    t.ack("f", 20)
    assert t.committable("f") is None and t.outstanding("f") == 2
    t.ack("f", 20)  # ...and its document was acknowledged once per line
    t.ack("f", 10)
    assert t.committable("f") == (20, 2)
    with pytest.raises(KeyError, match="no tracked line ends at offset 10"):
        t.hold("f", 10)
