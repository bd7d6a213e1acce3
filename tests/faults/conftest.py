"""What the fault campaign needs of this machine, and the file systems it injects faults with.

The faults are real: a small tmpfs fills up, a mount is remounted read-only, permissions are
taken away from a user the shipper runs as. That needs root (``mount``); without it a test is
skipped, naming what is missing, and with ``IOLENS_REQUIRE_LAB=1`` (set by CI) it fails instead."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REQUIRE_ENV = "IOLENS_REQUIRE_LAB"


def unavailable(why: str) -> None:
    """Skip with ``why``; fail with it where ``IOLENS_REQUIRE_LAB`` says faults must be injected."""
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{why} ({REQUIRE_ENV}=1: this machine must run the fault campaign)")
    pytest.skip(why)


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Callable[[str, int], Path]]:
    """``mount(name, size_bytes)``: a tmpfs of that size at ``tmp_path/name``, unmounted after
    the test (skip or fail, see :func:`unavailable`, where mounting is not allowed)."""
    if os.geteuid() != 0:
        unavailable("the fault campaign mounts file systems: it needs root")
    mounted: list[Path] = []

    def mount(name: str, size_bytes: int) -> Path:
        where = tmp_path / name
        where.mkdir()
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(where)],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            unavailable(f"cannot mount a tmpfs: {done.stderr.strip()}")
        mounted.append(where)
        return where

    yield mount
    for where in reversed(mounted):
        subprocess.run(["umount", "-l", str(where)], check=False)
