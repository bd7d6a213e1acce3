"""The incident lab's parts that run without root: delay control, Slurm rows, fio and MPI
command lines, the pipeline configuration, the live sadf follower's row selection."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.formats.slurm.decode import parse_sacct
from pipeline.lab.delayfs import Delays, parse_control, render_control
from pipeline.lab.params import LabParams, free_port, lab_config, mpi_iterations
from pipeline.lab.storage import Lun, Storage, teardown
from pipeline.lab.sysstat import _new_rows
from pipeline.lab.workload import (
    PROVENANCE,
    SACCT_HEADER,
    LabJob,
    darshan_env,
    fio_command,
    mpi_command,
    record_job,
)
from pipeline.settings import settings_from_mapping


def test_control_file_round_trip_and_errors() -> None:
    assert parse_control("* 0\nlun3.img 20\n# off\n\n") == {"*": 0.0, "lun3.img": 0.02}
    assert parse_control("12") == {"*": 0.012}
    assert render_control({"*": 0, "lun3.img": 20.5}) == "* 0\nlun3.img 20.5\n"
    with pytest.raises(ValueError, match="line 2: 'slow' is not a delay in ms"):
        parse_control("* 0\nlun3.img slow")
    with pytest.raises(ValueError, match=r"line 1: delay -1\.0 ms is negative"):
        parse_control("lun1.img -1")


def test_delays_are_read_again_once_a_second(tmp_path: Path) -> None:
    control = tmp_path / "delay"
    now = [100.0]
    delays = Delays(str(control), clock=lambda: now[0])
    assert delays.of("lun3.img") == 0.0  # no file: no delay
    Storage(str(tmp_path)).set_delays({3: 20})
    assert delays.of("lun3.img") == 0.0  # read less than a second ago
    now[0] += 1.0
    assert (delays.of("lun3.img"), delays.of("lun1.img")) == (0.02, 0.0)
    control.write_text("lun3.img fast\n")
    now[0] += 1.0
    assert delays.of("lun3.img") == 0.02  # a bad file keeps what was read before


def test_sacct_rows_parse_as_slurm_accounting(tmp_path: Path) -> None:
    slurm = tmp_path / "sacct.txt"
    record_job(slurm, LabJob(1003, "fio-lun3", (3,), 1, 1764085620.0, 1764085649.4, "COMPLETED"))
    record_job(slurm, LabJob(1025, "mpiio", (1, 2, 3, 4), 4, 1764085625.0, 1764085721.0, "FAILED"))
    lines = slurm.read_text().splitlines()
    assert lines[0] == SACCT_HEADER
    assert lines[1].endswith("|" + PROVENANCE)
    jobs = list(parse_sacct(lines, str(slurm)))
    assert [(j.id, j.name, j.state, j.exit_code, j.tasks) for j in jobs] == [  # type: ignore[union-attr]
        ("1003", "fio-lun3", "COMPLETED", "0:0", 1),
        ("1025", "mpiio", "FAILED", "1:0", 4),
    ]
    assert (jobs[1].start_s, jobs[1].end_s, jobs[1].elapsed_s) == (1764085625, 1764085721, 96)  # type: ignore[union-attr]


def test_fio_and_mpi_command_lines() -> None:
    cmd = fio_command(Path("/lab/mnt/lun3"), Path("/drop/seg0002/lun3"), 29, 40, 1000)
    assert "--filename=/lab/mnt/lun3/fio.dat" in cmd
    assert "--write_hist_log=/drop/seg0002/lun3" in cmd
    for opt in ("--thread", "--direct=1", "--ioengine=psync", "--per_job_logs=1", "--runtime=29",
                "--rate_iops=40", "--log_hist_msec=1000", "--log_unix_epoch=1"):  # fmt: skip
        assert opt in cmd
    mpi = mpi_command(Path("/w"), [Path("/a"), Path("/b")], 300, 64, 20)
    assert mpi == ["mpiexec", "-n", "2", "/w", "--iterations", "300", "--block-kib", "64",
                   "--pause-ms", "20", "/a", "/b"]  # fmt: skip
    env = darshan_env(Path("/lib/libdarshan.so"), Path("/drop/darshan"), 1003, nonmpi=True)
    assert (env["LD_PRELOAD"], env["DARSHAN_JOBID"], env["SLURM_JOB_ID"]) == (
        "/lib/libdarshan.so",
        "SLURM_JOB_ID",
        "1003",
    )
    assert env["DARSHAN_ENABLE_NONMPI"] == "1"
    assert "DARSHAN_ENABLE_NONMPI" not in darshan_env(Path("/l"), Path("/d"), 1, nonmpi=False)


def test_mpi_iterations_aim_at_a_minute_on_the_slow_lun() -> None:
    assert mpi_iterations(LabParams(delay_ms=20, duration_s=150)) == 500  # 60 s / 120 ms
    assert mpi_iterations(LabParams(delay_ms=25, duration_s=100)) == 345  # 50 s / 145 ms
    assert mpi_iterations(LabParams(delay_ms=0)) == 500  # capped: ~11 s on a healthy LUN
    assert mpi_iterations(LabParams(delay_ms=500)) == 200  # at least


def test_bad_parameters_are_named() -> None:
    for params, what in (
        (LabParams(luns=2), "--luns"),
        (LabParams(slow=7), "--slow 7"),
        (LabParams(onset_s=30), "--onset"),
        (LabParams(duration_s=10), "--duration"),
        (LabParams(luns=3, mpi_ranks=4), "--mpi-ranks"),
    ):
        with pytest.raises(ValueError, match=what):
            params.check()


def test_lab_config_is_a_valid_iolens_config(tmp_path: Path) -> None:
    st = Storage(
        str(tmp_path), luns=[Lun(k, f"/f/lun{k}.img", f"/dev/loop{k - 1}") for k in (1, 2, 3)]
    )
    cfg = settings_from_mapping(lab_config(LabParams(sla_ms=10), tmp_path, st, "vm"))
    assert [d.type for d in cfg.drops] == ["fio-hist", "sadf", "darshan", "slurm"]
    assert cfg.drops[0].host == "vm"
    assert dict(cfg.peer.groups) == {"vm:loop0": "lab", "vm:loop1": "lab", "vm:loop2": "lab"}
    assert (cfg.incident.sla.percentile, cfg.incident.sla.under_s) == (95, 0.01)
    assert cfg.darshan.min_nprocs == 0 and cfg.elasticsearch.namespace == "lab"


def test_the_follower_ships_only_complete_records() -> None:
    text = (
        "# hostname;interval;timestamp;DEV;tps\n"
        "vm;1;100;loop0;1.00\nvm;1;100;loop1;2.00\n"
        "vm;1;101;loop0;3.00\nvm;1;101;loop1;4.00\n"
        "vm;1;102;loop0;5.00\n"  # the newest record may still be written
    )
    header, rows, last = _new_rows(text, 0)
    assert header.startswith("# hostname")
    assert (rows, last) == (
        [
            "vm;1;100;loop0;1.00",
            "vm;1;100;loop1;2.00",
            "vm;1;101;loop0;3.00",
            "vm;1;101;loop1;4.00",
        ],
        101,
    )
    assert _new_rows(text, 101)[1:] == ([], 101)
    assert _new_rows(text, 101, final=True)[1:] == (["vm;1;102;loop0;5.00"], 102)  # sadc stopped


def test_teardown_of_nothing_is_harmless(tmp_path: Path) -> None:
    teardown(tmp_path / "never-built")
    assert not (tmp_path / "never-built" / "storage.json").exists()


def test_free_port_prefers_the_given_one() -> None:
    port = free_port(0)
    assert port > 0
    assert free_port(port) == port
