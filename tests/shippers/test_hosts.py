from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.shippers.hosts import (
    fio_host_suffix,
    fio_job_for,
    fio_prefix_for,
    host_for,
    unrotated,
)

DROP = Path("/drop")


@pytest.mark.parametrize(
    ("name", "prefix", "job", "host"),
    [
        ("randrw_clat_hist.3.log", "randrw", "3", None),
        ("randrw_clat_hist.3.log.gz", "randrw", "3", None),
        ("randrw_clat_hist.3.log.node07", "randrw", "3", "node07"),
        ("randrw_clat_hist.3.log.node07.gz", "randrw", "3", "node07"),
        ("x_clat_hist.12.log.n1.cluster.local", "x", "12", "n1.cluster.local"),
        ("job.v2_clat_hist.1.log", "job.v2", "1", None),
        ("a_b_clat_hist.1.log", "a_b", "1", None),
    ],
)
def test_fio_names(name: str, prefix: str, job: str, host: str | None) -> None:
    path = DROP / name
    assert fio_prefix_for(path) == prefix
    assert fio_job_for(path) == job
    assert fio_host_suffix(path) == host


@pytest.mark.parametrize(
    "name",
    [
        "randrw_clat_hist.log",  # per_job_logs=0: no job number
        "randrw_lat.1.log",
        "randrw_clat_hist.x.log",
        "_clat_hist.1.log",
        "randrw_clat_hist.1.txt",
    ],
)
def test_not_fio_names(name: str) -> None:
    with pytest.raises(ValueError, match="not an fio histogram log name"):
        fio_job_for(DROP / name)
    with pytest.raises(ValueError, match="not an fio histogram log name"):
        fio_prefix_for(DROP / name)
    assert fio_host_suffix(DROP / name) is None


@pytest.mark.parametrize(
    ("rel", "configured", "expected"),
    [
        ("node07/x_clat_hist.1.log.node09", "cfg", "cfg"),  # configured wins
        ("node07/x_clat_hist.1.log.node09", None, "node09"),  # name suffix before directory
        ("x_clat_hist.1.log.node09.gz", None, "node09"),
        ("node07/x_clat_hist.1.log", None, "node07"),
        ("node07/run1/x_clat_hist.1.log.gz", None, "node07"),  # first sub-directory
        ("x_clat_hist.1.log", None, "thishost"),  # nothing: default
        ("x_clat_hist.1.log.gz", None, "thishost"),
        ("other.log", None, "thishost"),
        ("node03/sa20240101", None, "node03"),  # not an fio name: directory rule only
        ("x_clat_hist.1.log", "", "thishost"),  # empty configured counts as unset
    ],
)
def test_host_for(rel: str, configured: str | None, expected: str) -> None:
    assert host_for(DROP / rel, DROP, configured, "thishost") == expected


def test_host_for_outside_drop_dir() -> None:
    with pytest.raises(ValueError, match="not inside the drop directory"):
        host_for(Path("/elsewhere/x_clat_hist.1.log"), DROP, None, "h")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("server.jsonl.1", "server.jsonl"),  # logrotate's default
        ("x_clat_hist.1.log.2.gz", "x_clat_hist.1.log.gz"),  # compress: the extension stays
        ("server.jsonl-20261122", "server.jsonl"),  # dateext
        ("server.jsonl-2026112213", "server.jsonl"),  # dateext, hourly
        ("a.csv-2026-11-22", "a.csv"),  # dateformat -%Y-%m-%d
        ("a.log-1763800000", "a.log"),  # dateformat -%s
        ("x_clat_hist.1.log", "x_clat_hist.1.log"),  # fio's job number is not a rotation
        ("x_clat_hist.1.log.node07", "x_clat_hist.1.log.node07"),  # a host suffix
        ("x_clat_hist.1.log.10.0.0.17", "x_clat_hist.1.log.10.0.0.17"),  # an IPv4 host
        ("x_clat_hist.3.log.gz", "x_clat_hist.3.log.gz"),
        ("sa22", "sa22"),
        ("fs001_sadf_d.csv", "fs001_sadf_d.csv"),
    ],
)
def test_unrotated_takes_off_logrotate_suffixes_only(name: str, expected: str) -> None:
    assert unrotated(Path("/drop") / name) == Path("/drop") / expected


def test_a_rotated_fio_log_keeps_its_host_and_job() -> None:
    rotated = unrotated(Path("/drop/node07/x_clat_hist.3.log.1"))
    assert host_for(rotated, Path("/drop"), None, "here") == "node07"
    assert fio_job_for(rotated) == "3"
