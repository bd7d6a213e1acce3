"""``darshan-parser`` text dumps read into the same shape, and the same analysis, as binary logs.

``darshan-parser`` (darshan-util) has no Debian package and its sources are not on PyPI, so it
cannot run here. The dumps are therefore written from the binary logs (read with pydarshan) in
darshan-parser's documented layout (reference/darshan-iominer.md 4): ``# key: value`` header
lines, ``# mount entry:`` lines, then one tab-separated line per counter, ``<module> <rank>
<record id> <counter> <value> <file name> <mount point> <fs type>``, integers plain and floats
as ``%.6f``, Lustre in both naming generations (3.5 components, and the older names).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.formats.darshan.decode import parse_darshan_text
from pipeline.formats.darshan.read import read_darshan
from pipeline.parsers.errors import ParseError
from pipeline.records.darshan_log import DarshanLog
from pipeline.reducers.darshan_job import analyze


def dump(log: DarshanLog, lustre: str = "3.5") -> Iterator[str]:
    """The log as ``darshan-parser --base`` prints it (see the module docstring)."""
    yield f"# darshan log version: {log.version}"
    yield "# compression method: ZLIB"
    yield f"# exe: {log.exe}"
    yield f"# uid: {log.uid}"
    yield f"# jobid: {log.jobid}"
    yield f"# start_time: {int(log.start_s)}"
    yield f"# end_time: {int(log.end_s)}"
    yield f"# nprocs: {log.nprocs}"
    yield f"# run time: {log.run_time_s:.4f}"
    yield f"# metadata: lib_ver = {log.lib_ver}"
    yield f"# metadata: h = {log.hints}"
    yield ""
    yield "# mounted file systems (mount point and fs type)"
    yield "# -------------------------------------------------------"
    yield "# mount entry:\t/scratch\tlustre"
    for mod, t in log.tables.items():
        yield "# *******************************************************"
        yield f"# {mod} module data"
        yield "# *******************************************************"
        for i in range(len(t)):
            rid, rank = int(t.ids[i]), int(t.ranks[i])
            name = log.names.get(rid, "")
            tail = f"{name}\t/scratch\tlustre"
            for j, c in enumerate(t.counter_names):
                yield f"{mod}\t{rank}\t{rid}\t{c}\t{int(t.counters[i, j])}\t{tail}"
            for j, c in enumerate(t.fcounter_names):
                yield f"{mod}\t{rank}\t{rid}\t{c}\t{t.fcounters[i, j]:.6f}\t{tail}"
    for rid, lay in log.layouts.items():
        pre = f"LUSTRE\t-1\t{rid}\t"
        tail = f"\t{log.names.get(rid, '')}\t/scratch\tlustre"
        if lustre == "3.5":
            yield f"{pre}LUSTRE_NUM_COMPONENTS\t1{tail}"
            yield f"{pre}LUSTRE_COMP1_STRIPE_SIZE\t{lay.stripe_size}{tail}"
            yield f"{pre}LUSTRE_COMP1_STRIPE_COUNT\t{lay.stripe_count}{tail}"
            yield f"{pre}LUSTRE_COMP1_POOL_NAME\tN/A{tail}"
            for k, o in enumerate(lay.osts):
                yield f"{pre}LUSTRE_COMP1_OST_ID_{k}\t{o}{tail}"
        else:
            yield f"{pre}LUSTRE_OSTS\t248{tail}"
            yield f"{pre}LUSTRE_STRIPE_SIZE\t{lay.stripe_size}{tail}"
            yield f"{pre}LUSTRE_STRIPE_WIDTH\t{lay.stripe_count}{tail}"
            for k, o in enumerate(lay.osts):
                yield f"{pre}LUSTRE_OST_ID_{k}\t{o}{tail}"


def assert_same_analysis(binary: DarshanLog, text: DarshanLog) -> None:
    a, b = analyze(binary), analyze(text)
    assert a.job.keys() == b.job.keys()
    for key, va in a.job.items():
        vb = b.job[key]
        if key in ("start_s", "end_s"):  # darshan-parser prints whole seconds
            assert vb == int(va)
        elif key.endswith("_bytes_per_s") and va:
            # %.6f timestamps: compare the time each bandwidth implies (bytes / bandwidth) to
            # a few printed µs; a job's I/O can last only tens of µs
            total = a.job["bytes_read"] + a.job["bytes_written"]
            nbytes = {"read": a.job["bytes_read"], "write": a.job["bytes_written"]}
            n = nbytes.get(key.split("_", 1)[0], total)
            assert math.isclose(n / va, n / vb, rel_tol=1e-5, abs_tol=1e-5), key
        elif isinstance(va, float) and not isinstance(va, bool):
            assert math.isclose(va, vb, rel_tol=1e-5, abs_tol=1e-5), key
        else:
            assert va == vb, key
    assert [c.name for c in a.critical] == [c.name for c in b.critical]
    assert [f["osts"] for f in a.files] == [f["osts"] for f in b.files]


@pytest.mark.parametrize("generation", ["3.5", "pre-3.5"])
def test_a_dump_of_sample_badost_analyses_like_the_binary(
    darshan_inputs: Path, generation: str
) -> None:
    binary = read_darshan(darshan_inputs / "sample-badost.darshan")
    text = parse_darshan_text(dump(binary, generation), "sample-badost.txt")
    assert (text.jobid, text.nprocs, text.version, text.hints) == (
        "6265799",
        2048,
        "3.10",
        "romio_no_indep_rw=true;cb_nodes=4",
    )
    assert text.layouts == binary.layouts
    assert_same_analysis(binary, text)
    assert analyze(text).critical[0].osts == (14,)


@pytest.mark.parametrize("name", ["sample.darshan", "sample-dxt-simple.darshan", "noposix.darshan"])
def test_dumps_of_other_patterns_analyse_like_the_binary(darshan_inputs: Path, name: str) -> None:
    binary = read_darshan(darshan_inputs / name)
    text = parse_darshan_text((line.encode() for line in dump(binary)), name + ".txt")
    assert_same_analysis(binary, text)


def test_output_that_is_not_darshan_parser_text_is_refused() -> None:
    with pytest.raises(ParseError, match=r"x.txt:1: not darshan-parser output"):
        parse_darshan_text(["POSIX\t0\t1\tPOSIX_OPENS\t1\tf\t/\text4"], "x.txt")


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("POSIX\t0\t1\tPOSIX_OPENS", "expected 8 tab-separated fields, found 4"),
        ("POSIX\tzero\t1\tPOSIX_OPENS\t1\tf\t/\text4", "rank 'zero' or record id '1'"),
        ("POSIX\t0\t1\tPOSIX_OPENS\tmany\tf\t/\text4", "POSIX_OPENS value 'many' is not a number"),
    ],
)
def test_a_bad_counter_line_names_its_line(line: str, reason: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_darshan_text(["# darshan log version: 3.41", "", line], "bad.txt")
    assert info.value.line_no == 3
    assert reason in info.value.reason
