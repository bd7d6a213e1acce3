"""The lab's native pieces: the cached Darshan runtime build and the MPI-IO writer.

The unit tests drive :mod:`pipeline.lab.darshan_build` with a fake ``run`` and a stub source
tarball. The end-to-end test builds (or reuses from the per-user cache, ``$XDG_CACHE_HOME/iolens``)
the real Darshan 3.4.7 runtime from the vendored release tarball
``<repo>/../shared/vendor/darshan-3.4.7.tar.gz``, runs ``mpiexec -n 4`` of the writer under it and
asserts the resulting Darshan log exactly. A cold build takes about a minute on 2 cores.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import darshan
import pytest

from pipeline.errors import ConfigError
from pipeline.lab.darshan_build import (
    DARSHAN_VERSION,
    TARBALL_ENV,
    default_cache_dir,
    ensure_libdarshan,
    ensure_mpi_writer,
)

RANKS = 4
ITERATIONS = 8
BLOCK_KIB = 64
JOB_ID = 4242

BUILD_STEPS = [
    ("./prepare.sh",),
    ("./configure", "--with-log-path-by-env=DARSHAN_LOG_DIR_PATH", "--with-jobid-env=NONE"),
    ("make", "-j2"),
    ("make", "install"),
]
"""The leading words of each build command, in the order they must run."""


class FakeRun:
    """A ``subprocess.run`` double that records commands and fakes what they produce.

    ``make install`` creates ``<prefix>/lib/libdarshan.so`` (prefix taken from the configure
    command); ``mpicc -o X`` creates an executable ``X``. ``fail_at`` makes the command whose
    first two words match exit 2 with some output.
    """

    def __init__(self, fail_at: tuple[str, ...] = ()) -> None:
        self.calls: list[tuple[list[str], Path]] = []
        self.fail_at = fail_at
        self.prefix: Path | None = None

    def __call__(self, command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append((command, Path(kwargs["cwd"])))
        if self.fail_at and tuple(command[: len(self.fail_at)]) == self.fail_at:
            return subprocess.CompletedProcess(command, 2, stdout="line 1\nerror: it broke\n")
        for word in command:
            if word.startswith("--prefix="):
                self.prefix = Path(word.removeprefix("--prefix="))
        if command == ["make", "install"]:
            assert self.prefix is not None
            (self.prefix / "lib").mkdir(parents=True)
            (self.prefix / "lib" / "libdarshan.so").write_bytes(b"\x7fELF")
        if command[0] == "mpicc":
            out = Path(command[command.index("-o") + 1])
            out.write_bytes(b"#!/bin/sh\n")
            out.chmod(out.stat().st_mode | stat.S_IXUSR)
        return subprocess.CompletedProcess(command, 0, stdout="ok\n")

    def leading_words(self) -> list[tuple[str, ...]]:
        """The first words of each recorded command, as long as the matching BUILD_STEPS entry."""
        return [
            tuple(cmd[: len(step)]) for (cmd, _), step in zip(self.calls, BUILD_STEPS, strict=False)
        ]


@pytest.fixture
def stub_tarball(tmp_path: Path) -> Path:
    """A tarball shaped like the Darshan release (top dir, prepare.sh, darshan-runtime/)."""
    top = tmp_path / "stub" / f"darshan-{DARSHAN_VERSION}"
    (top / "darshan-runtime").mkdir(parents=True)
    (top / "prepare.sh").write_text("#!/bin/sh\n", encoding="utf-8")
    tarball = tmp_path / f"darshan-{DARSHAN_VERSION}.tar.gz"
    with tarfile.open(tarball, "w:gz") as archive:
        archive.add(top, arcname=top.name)
    return tarball


@pytest.fixture
def fake_mpicc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Put a stub ``mpicc`` first on PATH and clear ``$IOLENS_DARSHAN_TARBALL``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    mpicc = bin_dir / "mpicc"
    mpicc.write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    mpicc.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.delenv(TARBALL_ENV, raising=False)


@pytest.mark.usefixtures("fake_mpicc")
def test_build_runs_the_steps_once_then_the_cache_is_reused(
    tmp_path: Path, stub_tarball: Path
) -> None:
    cache = tmp_path / "cache"
    first = FakeRun()
    library = ensure_libdarshan(cache, stub_tarball, run=first)

    prefix = cache.resolve() / f"darshan-{DARSHAN_VERSION}"
    assert library == prefix / "lib" / "libdarshan.so"
    assert first.leading_words() == BUILD_STEPS
    assert f"--prefix={prefix}" in first.calls[1][0]
    assert "CC=mpicc" in first.calls[1][0]
    top = cache.resolve() / "src" / f"darshan-{DARSHAN_VERSION}"
    assert [cwd for _, cwd in first.calls] == [top] + [top / "darshan-runtime"] * 3

    second = FakeRun()
    assert ensure_libdarshan(cache, stub_tarball, run=second) == library
    assert second.calls == []


@pytest.mark.usefixtures("fake_mpicc")
def test_failed_step_names_itself_and_the_build_is_redone(
    tmp_path: Path, stub_tarball: Path
) -> None:
    cache = tmp_path / "cache"
    with pytest.raises(ConfigError) as raised:
        ensure_libdarshan(cache, stub_tarball, run=FakeRun(fail_at=("make", "-j2")))
    message = str(raised.value)
    assert "build step 'make' failed with exit status 2: make -j2" in message
    assert "error: it broke" in message
    assert "apt-get install mpich libmpich-dev" in message

    retry = FakeRun()
    ensure_libdarshan(cache, stub_tarball, run=retry)
    assert retry.leading_words() == BUILD_STEPS


@pytest.mark.usefixtures("fake_mpicc")
def test_tarball_comes_from_the_environment_variable(
    tmp_path: Path, stub_tarball: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TARBALL_ENV, str(stub_tarball))
    run = FakeRun()
    ensure_libdarshan(tmp_path / "cache", url="http://invalid.example/none.tar.gz", run=run)
    assert run.leading_words() == BUILD_STEPS


@pytest.mark.usefixtures("fake_mpicc")
def test_missing_tarball_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nowhere\.tar\.gz not found"):
        ensure_libdarshan(tmp_path / "cache", tmp_path / "nowhere.tar.gz", run=FakeRun())


def test_missing_mpicc_says_what_to_install(
    tmp_path: Path, stub_tarball: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    run = FakeRun()
    with pytest.raises(ConfigError, match="mpicc not found on PATH: apt-get install mpich"):
        ensure_libdarshan(tmp_path / "cache", stub_tarball, run=run)
    assert run.calls == []


@pytest.mark.usefixtures("fake_mpicc")
def test_writer_is_compiled_once_per_source(tmp_path: Path) -> None:
    first = FakeRun()
    exe = ensure_mpi_writer(tmp_path, run=first)
    assert re.fullmatch(r"mpiio_writer-[0-9a-f]{16}", exe.name)
    ((command, _),) = first.calls
    assert command[:3] == ["mpicc", "-O2", "-o"]
    assert command[-1].endswith("mpiio_writer.c")

    second = FakeRun()
    assert ensure_mpi_writer(tmp_path, run=second) == exe
    assert second.calls == []


def test_default_cache_dir_follows_xdg() -> None:
    assert default_cache_dir({"XDG_CACHE_HOME": "/c"}) == Path("/c/iolens")
    assert default_cache_dir({}) == Path.home() / ".cache" / "iolens"


def _posix_bytes_written(report: Any) -> dict[str, tuple[int, int]]:
    """Map each POSIX record's file name to (rank, POSIX_BYTES_WRITTEN)."""
    counters = report.records["POSIX"].to_df()["counters"]
    return {
        report.name_records[row.id]: (int(row.rank), int(row.POSIX_BYTES_WRITTEN))
        for row in counters.itertuples()
    }


def test_mpi_writer_under_darshan_leaves_one_exact_log(
    tmp_path: Path, mpi_tools: None, darshan_tarball: Path
) -> None:
    cache = default_cache_dir()
    library = ensure_libdarshan(cache, darshan_tarball)
    writer = ensure_mpi_writer(cache)
    dirs = [tmp_path / "d0", tmp_path / "d1"]
    logs = tmp_path / "logs"
    for directory in [*dirs, logs]:
        directory.mkdir()
    env = {
        **os.environ,
        "LD_PRELOAD": str(library),
        "DARSHAN_LOG_DIR_PATH": str(logs),
        "DARSHAN_JOBID": "SLURM_JOB_ID",
        "SLURM_JOB_ID": str(JOB_ID),
    }
    # Non-MPI mode would make every rank (and mpiexec itself) write its own 1-process log.
    env.pop("DARSHAN_ENABLE_NONMPI", None)
    command = [
        "mpiexec", "-n", str(RANKS), str(writer),
        "--iterations", str(ITERATIONS), "--block-kib", str(BLOCK_KIB), *map(str, dirs),
    ]  # fmt: skip
    result = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr

    printed = [line.split() for line in result.stdout.splitlines()]
    assert [(words[0], words[2]) for words in printed] == [
        (f"rank={r}", f"dir={dirs[r % 2]}") for r in range(RANKS)
    ]
    (log,) = logs.iterdir()
    assert re.fullmatch(
        rf"[^_]+_{writer.name}_id{JOB_ID}-\d+_\d+-\d+-\d+-\d+_\d+\.darshan", log.name
    )
    report = darshan.DarshanReport(str(log), read_all=True)
    assert report.metadata["job"]["nprocs"] == RANKS
    assert report.metadata["job"]["jobid"] == JOB_ID
    assert _posix_bytes_written(report) == {
        str(dirs[r % 2] / f"mpiio.{r}.dat"): (r, ITERATIONS * BLOCK_KIB * 1024)
        for r in range(RANKS)
    }


def test_the_download_fetches_the_release_or_names_the_way_around(tmp_path: Path) -> None:
    """The download path (here from a ``file://`` URL: this machine has no internet) copies the
    tarball whole; a failing one says how to do without it."""
    from pipeline.lab.darshan_build import TARBALL_ENV, _download

    source = tmp_path / "release.tar.gz"
    source.write_bytes(b"\x1f\x8b" + bytes(range(256)) * 40)
    got = _download(source.as_uri(), tmp_path / "downloads" / "darshan-3.4.7.tar.gz")
    assert got.read_bytes() == source.read_bytes()
    assert not got.with_name(got.name + ".part").exists()
    with pytest.raises(ConfigError, match=f"cannot download Darshan from .*set {TARBALL_ENV}"):
        _download((tmp_path / "missing.tar.gz").as_uri(), tmp_path / "other" / "d.tar.gz")
