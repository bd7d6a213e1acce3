"""Build, once per machine, the native pieces the incident lab runs: Darshan's runtime and a writer.

The lab's jobs run under ``LD_PRELOAD=<libdarshan.so>`` so that every process leaves a real
Darshan log. Distributions do not package Darshan's runtime, so :func:`ensure_libdarshan` builds
release 3.4.7 from its source tarball into a per-user cache (outside the work tree) and reuses it
afterwards. :func:`ensure_mpi_writer` compiles ``mpiio_writer.c`` (package data beside this
module), the lab's multi-process MPI-IO job, into the same cache.

The runtime is built as Darshan's install guide says: ``darshan-runtime/`` configured with
``--with-log-path-by-env=DARSHAN_LOG_DIR_PATH --with-jobid-env=NONE CC=mpicc``, so the log
directory comes from the environment at run time and the job id is the process id unless
``DARSHAN_JOBID`` names a variable holding it, e.g. ``DARSHAN_JOBID=SLURM_JOB_ID``. A cold build
takes 30-50 s on 2 cores (measured on a 2-core VM, three runs: ``prepare.sh`` 9-10 s,
``configure`` 5-7 s, ``make -j2`` 16-30 s, ``make install`` <1 s, extraction ~1 s); a cache hit
takes milliseconds.

Both need an MPI compiler wrapper (``mpicc``); the Darshan build also needs the autotools and
zlib headers. On Debian/Ubuntu: ``apt-get install mpich libmpich-dev autoconf automake libtool
zlib1g-dev``.

Cache layout (``<cache>`` is :func:`default_cache_dir` unless the caller passes another)::

    <cache>/darshan-3.4.7/lib/libdarshan.so   the installed runtime (``--prefix``)
    <cache>/darshan-3.4.7.complete            stamp, written only after ``make install`` succeeded
    <cache>/darshan-3.4.7.lock                serialises concurrent builds (``flock``)
    <cache>/src/darshan-3.4.7/                the extracted source tree (removed after a build)
    <cache>/downloads/darshan-3.4.7.tar.gz    the downloaded release (when no tarball is given)
    <cache>/mpiio_writer-<sha256[:16]>        the writer, keyed by its source's hash
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import shutil
import subprocess
import tarfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from importlib.resources import files
from pathlib import Path
from typing import Any

from pipeline.errors import ConfigError

__all__ = [
    "DARSHAN_URL",
    "DARSHAN_VERSION",
    "TARBALL_ENV",
    "default_cache_dir",
    "ensure_libdarshan",
    "ensure_mpi_writer",
]

log = logging.getLogger(__name__)

DARSHAN_VERSION = "3.4.7"
"""The Darshan release the lab builds; the cache is keyed by it."""

DARSHAN_URL = f"https://web.cels.anl.gov/projects/darshan/releases/darshan-{DARSHAN_VERSION}.tar.gz"
"""The official release tarball, downloaded when no local tarball is given."""

DOWNLOAD_TIMEOUT_S = 60.0
"""How long the download may wait for the server at a time (s): a dead network fails, not hangs."""

TARBALL_ENV = "IOLENS_DARSHAN_TARBALL"
"""Environment variable naming a local Darshan source tarball (used instead of downloading)."""

WRITER_SOURCE = Path(str(files(__package__ or "pipeline.lab").joinpath("mpiio_writer.c")))
"""The MPI-IO writer's C source, shipped as package data beside this module."""

OUTPUT_TAIL_LINES = 25
"""How many trailing lines of a failed command's output an error message quotes."""

Run = Callable[..., "subprocess.CompletedProcess[Any]"]
"""``subprocess.run`` or a test double with the same calling convention."""

_APT_MPI = "apt-get install mpich libmpich-dev"
_APT_BUILD = "apt-get install mpich libmpich-dev autoconf automake libtool zlib1g-dev"


def default_cache_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """Return the per-user cache directory for iolens' built artefacts.

    Args:
        environ: The environment to read ``XDG_CACHE_HOME`` from.

    Returns:
        ``$XDG_CACHE_HOME/iolens`` when that variable is set and non-empty, else
        ``~/.cache/iolens``. The directory is not created here.
    """
    base = environ.get("XDG_CACHE_HOME")
    root = Path(base) if base else Path.home() / ".cache"
    return root / "iolens"


def ensure_libdarshan(
    cache_dir: Path,
    tarball: Path | None = None,
    url: str = DARSHAN_URL,
    run: Run = subprocess.run,
) -> Path:
    """Return the path of a built ``libdarshan.so`` (Darshan 3.4.7 runtime), building it if needed.

    A build completed earlier (its stamp file present and the library still installed) is reused
    without running anything. Otherwise the source is taken from ``tarball``, else from the file
    named by ``$IOLENS_DARSHAN_TARBALL``, else downloaded from ``url``, and built (see the module
    docstring). Concurrent callers on one cache directory wait for each other (``flock``).

    Args:
        cache_dir: Where to build and install (created if missing), outside the work tree.
        tarball: A local ``darshan-3.4.7.tar.gz``; ``None``: ``$IOLENS_DARSHAN_TARBALL`` or ``url``.
        url: Where to download the release tarball from when no local one is given.
        run: ``subprocess.run`` or a test double; called with a command list and keyword
            arguments ``cwd``, ``stdout``, ``stderr``, ``text``, ``check``.

    Returns:
        The absolute path of ``libdarshan.so`` under ``<cache_dir>/darshan-3.4.7/lib``.

    Raises:
        ConfigError: ``mpicc`` is not on ``PATH``, the tarball is missing or cannot be
            downloaded, or a build step fails (the message names the step, the command, the
            tail of its output and the packages to install).
    """
    cache_dir = cache_dir.resolve()
    cache_dir.mkdir(parents=True, exist_ok=True)
    with _locked(cache_dir / f"darshan-{DARSHAN_VERSION}.lock"):
        cached = _cached_library(cache_dir)
        if cached is not None:
            log.debug("reusing cached Darshan runtime %s", cached)
            return cached
        return _build_and_stamp(_resolve_tarball(cache_dir, tarball, url), cache_dir, run)


def _cached_library(cache_dir: Path) -> Path | None:
    """The library of a completed earlier build (stamp present, library still installed)."""
    if not (cache_dir / f"darshan-{DARSHAN_VERSION}.complete").exists():
        return None
    return _installed_library(cache_dir / f"darshan-{DARSHAN_VERSION}")


def _build_and_stamp(source: Path, cache_dir: Path, run: Run) -> Path:
    """Build the runtime from ``source`` into the cache and write the stamp; the library.

    The stamp is written only after ``make install`` succeeded, so an interrupted build is redone.

    Raises:
        ConfigError: a build step fails, or no ``libdarshan.so`` was installed.
    """
    prefix = cache_dir / f"darshan-{DARSHAN_VERSION}"
    started = time.monotonic()
    _build(source, cache_dir, prefix, run)
    library = _installed_library(prefix)
    if library is None:
        raise ConfigError(
            f"Darshan build finished but no libdarshan.so under {prefix}/lib*; "
            f"remove {prefix} and retry"
        )
    (cache_dir / f"darshan-{DARSHAN_VERSION}.complete").write_text(f"{library}\n", encoding="utf-8")
    log.info("built %s in %.0f s", library, time.monotonic() - started)
    return library


def ensure_mpi_writer(cache_dir: Path, run: Run = subprocess.run) -> Path:
    """Return the path of the compiled MPI-IO writer, compiling it with ``mpicc -O2`` if needed.

    The executable is named after the SHA-256 of ``mpiio_writer.c``, so an edited source is
    rebuilt and an unchanged one reused. The compiler writes to a temporary name that is renamed
    into place, so an interrupted compile leaves nothing that looks finished.

    Args:
        cache_dir: Where to put the executable (created if missing).
        run: ``subprocess.run`` or a test double (see :func:`ensure_libdarshan`).

    Returns:
        The absolute path of ``<cache_dir>/mpiio_writer-<sha256[:16]>``.

    Raises:
        ConfigError: ``mpicc`` is not on ``PATH`` or the compile fails.
    """
    source = WRITER_SOURCE.read_bytes()
    digest = hashlib.sha256(source).hexdigest()[:16]
    cache_dir = cache_dir.resolve()
    exe = cache_dir / f"mpiio_writer-{digest}"
    if exe.is_file() and os.access(exe, os.X_OK):
        log.debug("reusing cached MPI-IO writer %s", exe)
        return exe
    _require_mpicc(_APT_MPI)
    cache_dir.mkdir(parents=True, exist_ok=True)
    return _compile_writer(exe, run)


def _compile_writer(exe: Path, run: Run) -> Path:
    """Compile the writer to a temporary name in ``exe``'s directory, then rename it to ``exe``.

    Raises:
        ConfigError: the compile fails.
    """
    partial = exe.with_name(f"{exe.name}.{os.getpid()}.partial")
    command = ["mpicc", "-O2", "-o", str(partial), str(WRITER_SOURCE)]
    _run_step("compile mpiio_writer", command, exe.parent, run, _APT_MPI)
    os.replace(partial, exe)
    log.info("compiled %s", exe)
    return exe


@contextmanager
def _locked(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock_path`` for the duration of the block."""
    with lock_path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _installed_library(prefix: Path) -> Path | None:
    """Return ``libdarshan.so`` under ``prefix/lib`` (or ``lib64``), or ``None`` if absent."""
    for libdir in ("lib", "lib64"):
        candidate = prefix / libdir / "libdarshan.so"
        if candidate.exists():
            return candidate
    return None


def _resolve_tarball(cache_dir: Path, tarball: Path | None, url: str) -> Path:
    """Return a local source tarball: the argument, ``$IOLENS_DARSHAN_TARBALL``, or a download.

    Raises:
        ConfigError: The named tarball does not exist, or the download failed.
    """
    if tarball is None and os.environ.get(TARBALL_ENV):
        tarball = Path(os.environ[TARBALL_ENV])
    if tarball is not None:
        if not tarball.is_file():
            raise ConfigError(
                f"Darshan source tarball {tarball} not found; pass an existing "
                f"darshan-{DARSHAN_VERSION}.tar.gz (or unset {TARBALL_ENV} to download {url})"
            )
        return tarball
    return _download(url, cache_dir / "downloads" / f"darshan-{DARSHAN_VERSION}.tar.gz")


def _download(url: str, target: Path) -> Path:
    """Download ``url`` to ``target`` (via a ``.part`` file) unless ``target`` already exists.

    Raises:
        ConfigError: The download failed (network, HTTP error).
    """
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.part")
    log.info("downloading %s", url)
    try:
        with (
            urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as resp,
            open(partial, "wb") as f,
        ):
            shutil.copyfileobj(resp, f)
    except OSError as exc:
        raise ConfigError(
            f"cannot download Darshan from {url}: {exc}; download it by hand and set "
            f"{TARBALL_ENV} to the file"
        ) from exc
    os.replace(partial, target)
    return target


def _build(tarball: Path, cache_dir: Path, prefix: Path, run: Run) -> None:
    """Extract ``tarball`` and build/install the Darshan runtime into ``prefix``.

    How, and how long it takes: the module docstring.

    Raises:
        ConfigError: ``mpicc`` missing, a bad tarball, or a failing build step.
    """
    _require_mpicc(_APT_BUILD)
    top = _extract(tarball, cache_dir / "src")
    runtime = top / "darshan-runtime"
    configure = [
        "./configure",
        "--with-log-path-by-env=DARSHAN_LOG_DIR_PATH",
        "--with-jobid-env=NONE",
        "CC=mpicc",
        f"--prefix={prefix}",
    ]
    steps: list[tuple[str, list[str], Path]] = [
        ("prepare.sh", ["./prepare.sh"], top),
        ("configure", configure, runtime),
        ("make", ["make", "-j2"], runtime),
        ("make install", ["make", "install"], runtime),
    ]
    log.info("building Darshan %s runtime from %s into %s", DARSHAN_VERSION, tarball, prefix)
    for name, command, cwd in steps:
        started = time.monotonic()
        _run_step(name, command, cwd, run, _APT_BUILD)
        log.info("darshan build: %s done in %.1f s", name, time.monotonic() - started)
    shutil.rmtree(top, ignore_errors=True)


def _extract(tarball: Path, src_root: Path) -> Path:
    """Extract ``tarball`` under ``src_root`` (replacing an earlier, possibly partial, tree).

    Returns:
        The top directory of the source tree, ``<src_root>/darshan-3.4.7``.

    Raises:
        ConfigError: The file is not a readable tarball or lacks ``darshan-3.4.7/prepare.sh``.
    """
    top = src_root / f"darshan-{DARSHAN_VERSION}"
    shutil.rmtree(top, ignore_errors=True)
    src_root.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(tarball, "r:*") as archive:
            archive.extractall(src_root, filter="data")
    except (tarfile.TarError, OSError) as exc:
        raise ConfigError(f"cannot extract Darshan source tarball {tarball}: {exc}") from exc
    if not (top / "prepare.sh").is_file():
        raise ConfigError(
            f"{tarball} is not the Darshan {DARSHAN_VERSION} source release "
            f"(no darshan-{DARSHAN_VERSION}/prepare.sh inside)"
        )
    return top


def _require_mpicc(install_hint: str) -> None:
    """Raise unless an ``mpicc`` is on ``PATH``.

    Raises:
        ConfigError: ``mpicc`` not found; the message names the packages to install.
    """
    if shutil.which("mpicc") is None:
        raise ConfigError(f"mpicc not found on PATH: {install_hint}")


def _run_step(name: str, command: Sequence[str], cwd: Path, run: Run, install_hint: str) -> None:
    """Run one build step, output captured; raise a ConfigError that explains a failure.

    Raises:
        ConfigError: The program is missing or exits non-zero; the message names the step, the
            command, its directory, the last ``OUTPUT_TAIL_LINES`` lines of output and the fix.
    """
    shown = " ".join(command)
    log.debug("running %s in %s", shown, cwd)
    try:
        result = run(
            list(command),
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            check=False,
        )
    except FileNotFoundError as exc:
        raise ConfigError(
            f"build step {name!r} cannot start {command[0]!r} ({exc}); install: {install_hint}"
        ) from exc
    if result.returncode != 0:
        output = result.stdout if isinstance(result.stdout, str) else ""
        tail = "\n".join(output.splitlines()[-OUTPUT_TAIL_LINES:])
        raise ConfigError(
            f"build step {name!r} failed with exit status {result.returncode}: {shown} "
            f"(in {cwd})\n--- last lines of output ---\n{tail}\n---\n"
            f"check the build prerequisites are installed: {install_hint}"
        )
