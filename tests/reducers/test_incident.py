"""Incidents from peer-comparison windows, fio breaches and diagnosed Darshan jobs."""

from pipeline.reducers.incident import (
    Breach,
    JobOnLun,
    LunWindow,
    Span,
    StoredIncident,
    continued,
    correlate,
    spans,
)


def win(lun: str, end: float, anomalous: bool = False, faulty: bool = False, score: float = 0.0):
    return LunWindow(lun, "lab", "await", end - 30, end, anomalous, faulty, score)


def series(lun: str, verdicts: str, first_end: float = 1000.0, shift: float = 10.0):
    """One window per character: '.' normal, 'a' anomalous, 'F' anomalous and faulty,
    'f' faulty but no longer anomalous (k-of-2k-1 keeps it faulty)."""
    return [
        win(lun, first_end + i * shift, c in "aF", c in "Ff", 100.0 if c in "aF" else 20.0)
        for i, c in enumerate(verdicts)
    ]


def test_one_closed_incident_from_the_streak_start_to_the_last_faulty_window() -> None:
    ws = series("vm/loop3", "....aaFFFFff........") + series("vm/loop1", "....................")
    (s,) = spans(ws, gap_s=30.0, lead_s=5.0)
    assert (s.lun, s.group, s.metric) == ("vm/loop3", "lab", "await")
    assert s.start_s == 1040  # the end of the first anomalous window of the streak
    assert s.last_s == 1110  # the end of the last faulty window
    assert (s.windows, s.max_score, s.closed) == (6, 100.0, True)
    # first anomalous end; last anomalous start less the moving average's reach
    assert s.slow_s == (1040, 1090 - 30 - 5)


def test_open_until_the_lun_stayed_healthy_for_gap_s() -> None:
    (s,) = spans(series("vm/loop3", "..aaFF.."), gap_s=30.0)
    assert s.closed is False  # last faulty ends 1050, evaluated up to 1070 < 1080
    (s,) = spans(series("vm/loop3", "..aaFF..."), gap_s=30.0)
    assert s.closed is True
    assert s.id == spans(series("vm/loop3", "..aaFF.."), gap_s=30.0)[0].id  # same id


def test_faulty_windows_further_apart_than_gap_are_two_incidents() -> None:
    ws = series("vm/loop3", "aF.....aF....")
    assert [(s.start_s, s.last_s, s.closed) for s in spans(ws, gap_s=30.0)] == [
        (1000.0, 1010.0, True),
        (1070.0, 1080.0, True),
    ]
    (merged,) = spans(ws, gap_s=60.0)
    assert (merged.start_s, merged.last_s, merged.windows) == (1000.0, 1080.0, 2)
    assert merged.slow_s == (980.0, 1070.0)


def test_no_faulty_window_no_incident() -> None:
    assert spans(series("vm/loop3", "..aa..a.."), gap_s=30.0) == []


def test_correlate_keeps_what_is_on_the_lun_and_in_time() -> None:
    span = Span("vm/loop3", "lab", "await", 1000.0, 1200.0, True, 12, 100.0, (1000.0, 1170.0))
    breaches = [
        Breach("vm", "lun3.1", 950.0, 25.0),  # within the 60 s margin
        Breach("vm", "lun3.1", 1100.0, 30.0),
        Breach("vm", "lun3.1", 1100.0, 31.0),  # the same interval, another direction
        Breach("vm", "lun5.1", 1500.0, 12.0),  # after the end
        Breach("vm", "lun4.1", 900.0, 12.0),  # before the margin
    ]
    f3 = ("/lab/mnt/lun3/fio.dat",)
    jobs = [
        JobOnLun("17", 1050.0, 1150.0, "vm/loop3", "/lab/mnt/lun3", ("/lab/mnt/lun3/mpiio.2.dat",)),
        JobOnLun("9", 990.0, 1010.0, "vm/loop3", "/lab/mnt/lun3", f3),  # overlaps its start
        JobOnLun("8", 960.0, 990.0, "vm/loop3", "/lab/mnt/lun3", f3),  # before the fault
        JobOnLun("10", 1175.0, 1190.0, "vm/loop3", "/lab/mnt/lun3", f3),  # after it was sure
        JobOnLun("12", 1050.0, 1150.0, "vm/loop1", "/lab/mnt/lun1", ("/lab/mnt/lun1/fio.dat",)),
        JobOnLun("20", 1300.0, 1400.0, "vm/loop3", "/lab/mnt/lun3", ("/lab/mnt/lun3/late",)),
    ]
    inc = correlate(span, breaches, jobs, margin_s=60.0, now_s=2000.0, persistence=(1, 9.0))
    assert inc.jobs == ("9", "17")
    assert inc.critical_files == ("/lab/mnt/lun3/fio.dat", "/lab/mnt/lun3/mpiio.2.dat")
    assert (inc.fio_breaches, inc.fio_jobs) == (2, ("vm/lun3.1",))
    assert inc.mount_point == "/lab/mnt/lun3"
    assert inc.persistence == (1, 9.0)
    assert inc.summary == (
        "vm/loop3 (/lab/mnt/lun3) was persistently anomalous among the lab peers (await) from "
        "1970-01-01 00:16:40 UTC to 1970-01-01 00:20:00 UTC; 2 fio intervals of vm/lun3.1 "
        "broke the SLA; Darshan jobs 9, 17 had critical files on it (/lab/mnt/lun3/fio.dat, "
        "/lab/mnt/lun3/mpiio.2.dat)."
    )


def test_an_open_incident_reaches_to_now() -> None:
    span = Span("vm/loop3", "lab", "await", 1000.0, 1200.0, False, 12, 100.0)
    inc = correlate(span, [Breach("vm", "3", 1500.0, 25.0)], [], margin_s=0.0, now_s=1600.0)
    assert (inc.fio_breaches, inc.jobs, inc.mount_point) == (1, (), None)
    assert "and is still slow; 1 fio interval of vm/3 broke the SLA." in inc.summary
    assert Breach("vm", "3", 1500.0, 25.0).name == "vm/3"  # indexed without its log prefix


def test_a_lone_anomalous_window_after_recovery_is_not_the_incident() -> None:
    (s,) = spans(series("vm/loop3", "..aaFFFff..a......"), gap_s=30.0, lead_s=5.0)
    # the last anomalous window of the streak starts at 1060 - 30; the lone one at 1110 - 30
    assert (s.start_s, s.last_s, s.slow_s, s.windows) == (1020.0, 1080.0, (1020.0, 1025.0), 5)
    assert s.closed


def test_an_open_incident_of_a_lun_no_longer_evaluated_closes() -> None:
    ws = series("vm/loop3", "..aaFF..")  # evaluated up to 1070
    (s,) = spans(ws, gap_s=30.0, now_s=1070 + 3599, stale_s=3600)
    assert not s.closed
    (s,) = spans(ws, gap_s=30.0, now_s=1070 + 3600, stale_s=3600)
    assert (s.closed, s.last_s) == (True, 1050.0)


def test_a_closed_incident_stays_closed_when_the_lun_is_slow_again() -> None:
    """Closing and joining measure the same thing (window ends), so a faulty window after
    the incident closed starts a new one and never reopens the old one under its id."""
    closed = spans(series("vm/loop3", "aaFF..."), gap_s=30.0)
    (first,) = closed
    assert first.closed
    again = spans(series("vm/loop3", "aaFF...F"), gap_s=30.0)
    assert [(s.id == first.id, s.closed) for s in again] == [(True, True), (False, False)]


def test_metrics_are_streaks_of_their_own_and_one_incident_per_lun() -> None:
    wait = series("vm/loop3", "..aaFF....")
    util = [
        LunWindow(w.lun, w.group, "util", w.start_s, w.end_s, w.anomalous, w.faulty, w.score)
        for w in series("vm/loop3", "...aFF....")
    ]
    (alone,) = spans(wait, gap_s=30.0)
    (both,) = spans(wait + util, gap_s=30.0)
    assert (both.start_s, both.id) == (alone.start_s, alone.id)  # util does not move it
    assert (both.windows, both.last_s, both.closed) == (4, 1050.0, True)


def test_a_stretch_continues_the_stored_incident_its_start_moved_away_from() -> None:
    moved = Span("vm/loop3", "lab", "util", 900.0, 1200.0, False, 14, 100.0)
    later = Span("vm/loop3", "lab", "await", 2000.0, 2100.0, False, 3, 90.0)
    other = Span("vm/loop1", "lab", "await", 1000.0, 1100.0, False, 5, 90.0)
    stored = [
        StoredIncident("was-1000", "vm/loop3", 1000.0),  # the first run's start of `moved`
        StoredIncident("long-ago", "vm/loop3", 100.0, open=False),  # an earlier incident
        StoredIncident(other.id, "vm/loop1", 1000.0),  # stored under its own id
    ]
    out = continued([moved, later, other], stored, gap_s=30.0)
    assert [s.id for s in out] == ["was-1000", later.id, other.id]
    assert out[0].start_s == 900.0 and out[0].continues == "was-1000"
    assert (out[1], out[2]) == (later, other)
    # a stored id goes to one stretch only, and a stretch stored under its own id keeps it
    again = continued([moved, moved], [StoredIncident("was-1000", "vm/loop3", 1000.0)], 30.0)
    assert [s.id for s in again] == ["was-1000", moved.id]
    assert continued([moved], [StoredIncident(moved.id, "vm/loop3", 900.0)], 30.0) == [moved]
