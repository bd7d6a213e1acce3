"""The lab's hosts: network and UTS namespaces on one machine, joined by a bridge.

Host ``h`` (1-based) is the network namespace ``iolens-lab-h<h>`` with one veth interface
(``eth0``, address ``10.77.0.<10+h>/24``) whose other end, ``iolv<h>``, is a port of the bridge
``iolbr0`` (``10.77.0.1/24``) in the root namespace, where the cluster listens. Every process of a
host runs through :meth:`Hosts.prefix`: ``ip netns exec`` into its network namespace and
``unshare --uts`` with its own hostname, so sadc, fio and iolens name the host as a site's
machine would. Cutting a host off (a partition) takes its bridge port down: it reaches neither
the cluster nor the other hosts until the port is up again. A host's clock skew is libfaketime
(Debian's ``faketime``) preloaded into its processes: their wall clock runs that far off.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import shutil
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pipeline.lab.storage import LabError

log = logging.getLogger(__name__)

BRIDGE = "iolbr0"
GATEWAY = "10.77.0.1"
"""The root namespace's address on the bridge: the cluster, as the hosts reach it."""
FAKETIME_LIBS = (
    Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"),
    Path("/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1"),
)


def _ip(*args: str, check: bool = True) -> None:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise LabError(f"ip {' '.join(args)}: {proc.stderr.strip()}")


def faketime_lib() -> Path:
    """libfaketime's path.

    Raises:
        LabError: it is not installed (``apt-get install faketime``).
    """
    for path in FAKETIME_LIBS:
        if path.exists():
            return path
    raise LabError("libfaketime not found: apt-get install faketime")


@dataclass
class Hosts:
    """``n`` lab hosts named ``<base>-h<h>``.

    Args:
        n: how many.
        base: the hostnames' stem (the machine's own name).
        skew: host -> seconds its wall clock runs ahead (negative: behind).
    """

    n: int
    base: str
    skew: dict[int, float]

    def name(self, h: int) -> str:
        """Host ``h``'s hostname."""
        return f"{self.base}-h{h}"

    def netns(self, h: int) -> str:
        """Host ``h``'s network namespace."""
        return f"iolens-lab-h{h}"

    @staticmethod
    def address(h: int) -> str:
        """Host ``h``'s address on the bridge."""
        return f"10.77.0.{10 + h}"

    def setup(self) -> None:
        """Create the bridge and the hosts (after removing what a previous lab left).

        Raises:
            LabError: ``ip`` is missing or refused (not root, no network namespaces).
        """
        if shutil.which("ip") is None or shutil.which("unshare") is None:
            raise LabError("ip or unshare not found: apt-get install iproute2 util-linux")
        if self.skew:
            faketime_lib()
        self.teardown()
        _ip("link", "add", BRIDGE, "type", "bridge")
        _ip("addr", "add", f"{GATEWAY}/24", "dev", BRIDGE)
        _ip("link", "set", BRIDGE, "up")
        for h in range(1, self.n + 1):
            ns, port = self.netns(h), f"iolv{h}"
            _ip("netns", "add", ns)
            _ip("link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("link", "set", port, "master", BRIDGE)
            _ip("link", "set", port, "up")
            _ip("-n", ns, "addr", "add", f"{self.address(h)}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", ns, "link", "set", "lo", "up")

    def kill_all(self) -> int:
        """SIGKILL every process still in a host's network namespace (a worker an instance left
        behind would keep the host's copy of the LUNs' mounts, and the loop devices, busy);
        returns how many."""
        killed = 0
        for h in range(1, max(self.n, 8) + 1):
            proc = subprocess.run(
                ["ip", "netns", "pids", self.netns(h)], capture_output=True, text=True, check=False
            )
            for pid in (int(p) for p in proc.stdout.split() if p.isdigit()):
                if pid != os.getpid():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                        killed += 1
        return killed

    def teardown(self) -> None:
        """Stop what runs in the hosts, remove them and the bridge (what exists of them);
        never raises."""
        self.kill_all()
        for h in range(1, max(self.n, 8) + 1):
            _ip("netns", "del", self.netns(h), check=False)
            _ip("link", "del", f"iolv{h}", check=False)
        _ip("link", "del", BRIDGE, check=False)

    def prefix(self, h: int) -> list[str]:
        """The command prefix that runs a program as host ``h``: in its network namespace, with
        its hostname, and with its clock skew (``exec`` all the way: the process started is the
        program, so its pid is the program's)."""
        script = 'hostname "$0"; '
        skew = self.skew.get(h)
        if skew:
            lib = faketime_lib()
            script += (
                f"export FAKETIME='{skew:+g}s' FAKETIME_DONT_FAKE_MONOTONIC=1 "
                f'LD_PRELOAD="{lib}${{LD_PRELOAD:+:$LD_PRELOAD}}"; '
            )
        script += 'exec "$@"'
        netns = ["ip", "netns", "exec", self.netns(h)]
        return [*netns, "unshare", "--uts", "sh", "-c", script, self.name(h)]

    def run_as(self, h: int, cmd: Sequence[str]) -> list[str]:
        """``cmd`` run as host ``h`` (see :meth:`prefix`)."""
        return [*self.prefix(h), *cmd]

    def launcher(self, path: Path, log_path: Path) -> Path:
        """Write, at ``path``, the program MPICH's Hydra runs in place of ssh
        (``-launcher ssh -launcher-exec``): it is called as ``[-x] <host> <command...>``, notes
        the host in ``log_path`` and runs the command as that host (:meth:`prefix`); returns
        ``path``."""
        cases = "".join(
            f'  {self.name(h)}) exec {shlex.join(self.prefix(h))} sh -c "$*" ;;\n'
            for h in range(1, self.n + 1)
        )
        path.write_text(
            "#!/bin/sh\n# run by mpiexec as it would run ssh: [options] <host> <command...>\n"
            'while [ "${1#-}" != "$1" ]; do shift; done\n'
            'host="$1"; shift\n'
            f'echo "$host" >> {shlex.quote(str(log_path))}\n'
            f'case "$host" in\n{cases}esac\n'
            'echo "no lab host $host" >&2; exit 255\n'
        )
        path.chmod(0o755)
        return path

    def cut(self, h: int, off: bool) -> None:
        """Cut host ``h`` off from the cluster and the other hosts (``off``), or join it again.

        Raises:
            LabError: ``ip`` refused.
        """
        _ip("link", "set", f"iolv{h}", "down" if off else "up")
