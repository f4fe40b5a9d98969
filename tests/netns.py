"""Test hosts as Linux network namespaces on this machine, and a partition between them.

:class:`Hosts` makes ``count`` namespaces, each with one veth pair to the root namespace: host
``i`` is ``10.213.i.2/24`` inside its namespace and reaches the root namespace at
``10.213.i.1`` (the address a service in the root namespace listens on for it). Names are
unique per test run (``lc<pid>h<i>``), so runs side by side never share one. Everything is
removed by :meth:`Hosts.remove`, which a test calls in a ``finally`` (deleting a namespace
deletes its end of the pair, and with it the root end).

A cut (:meth:`Hosts.cut`) puts a ``blackhole`` queueing discipline on both ends of the host's
link: every packet either way is dropped silently, the links stay up and the routes stay. That
is a partition as TCP sees one when a switch or a cable between two machines fails: nothing
answers, nothing refuses, so open connections hang and retransmit, connects time out, and
once healed (:meth:`Hosts.heal`) a retransmission delivers what was in flight, late. Taking the
link down instead would remove the root namespace's route to the host (its replies would go
out the default route) and tell the host's own stack that the carrier is gone; ``netem loss``
would do the same as ``blackhole`` but needs ``sch_netem``, which not every kernel has.

Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN for ``ip netns``): :func:`unavailable` says
why not, for the test to skip (or fail under ``CI=true``) with the reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence

NETWORK = "10.213.0.0/16"  # private, and far from the usual 10.0.x / 10.1.x / docker ranges


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False, timeout=30)
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed: {done.stderr.strip()}")
    return done


def _tc(namespace: str | None, *args: str, check: bool = True) -> None:
    command = ["tc", *args]
    if namespace is not None:
        command = ["ip", "netns", "exec", namespace, *command]
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=30)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {done.stderr.strip()}")


def unavailable() -> str | None:
    """Why this machine cannot run :class:`Hosts`, or None when it can."""
    if sys.platform != "linux":
        return f"network namespaces need Linux, not {sys.platform}"
    if os.geteuid() != 0:
        return "network namespaces and veth pairs need root (ip netns add)"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"the {tool!r} command (iproute2) is not installed"
    probe = f"lc{os.getpid()}probe"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"ip netns add failed: {made.stderr.strip()}"
    try:
        # The cut needs the blackhole qdisc: check it exists in this kernel.
        _tc(probe, "qdisc", "add", "dev", "lo", "root", "blackhole", check=False)
        shown = subprocess.run(
            ["ip", "netns", "exec", probe, "tc", "qdisc", "show", "dev", "lo"],
            capture_output=True,
            text=True,
            check=False,
        )
        if "blackhole" not in shown.stdout:
            return "this kernel has no blackhole qdisc (tc qdisc add ... blackhole)"
    finally:
        _ip("netns", "del", probe, check=False)
    return None


class Hosts:
    """``count`` namespaces linked to the root namespace; :meth:`remove` deletes them."""

    def __init__(self, count: int) -> None:
        if not 1 <= count <= 250:
            raise ValueError("between 1 and 250 hosts")
        prefix = f"lc{os.getpid()}"
        self.names = [f"{prefix}h{i}" for i in range(1, count + 1)]
        self._root_ends = [f"{prefix}r{i}" for i in range(1, count + 1)]
        self._host_ends = [f"{prefix}n{i}" for i in range(1, count + 1)]
        self._made: list[str] = []
        self._cut: set[int] = set()
        try:
            for index in range(count):
                self._add(index)
        except BaseException:
            self.remove()
            raise

    def _add(self, index: int) -> None:
        name, root_end, host_end = self.names[index], self._root_ends[index], self._host_ends[index]
        _ip("netns", "add", name)
        self._made.append(name)
        _ip("link", "add", root_end, "type", "veth", "peer", "name", host_end, "netns", name)
        _ip("addr", "add", f"{self.gateway(index)}/24", "dev", root_end)
        _ip("link", "set", "dev", root_end, "up")
        _ip("-n", name, "addr", "add", f"{self.address(index)}/24", "dev", host_end)
        _ip("-n", name, "link", "set", "dev", host_end, "up")
        _ip("-n", name, "link", "set", "dev", "lo", "up")

    @staticmethod
    def gateway(index: int) -> str:
        """The root namespace's address on host ``index``'s link (0-based)."""
        return f"10.213.{index + 1}.1"

    @staticmethod
    def address(index: int) -> str:
        """Host ``index``'s own address."""
        return f"10.213.{index + 1}.2"

    @property
    def gateways(self) -> list[str]:
        return [self.gateway(i) for i in range(len(self.names))]

    def command(self, index: int, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside host ``index``'s namespace."""
        return ["ip", "netns", "exec", self.names[index], *argv]

    def cut(self, index: int) -> float:
        """Drop every packet between host ``index`` and the root namespace, both ways;
        returns ``time.time()`` once both ends drop."""
        _tc(None, "qdisc", "add", "dev", self._root_ends[index], "root", "blackhole")
        self._cut.add(index)
        _tc(self.names[index], "qdisc", "add", "dev", self._host_ends[index], "root", "blackhole")
        return time.time()

    def heal(self, index: int) -> float:
        """Undo :meth:`cut`; returns ``time.time()`` once both ends pass packets again."""
        _tc(self.names[index], "qdisc", "del", "dev", self._host_ends[index], "root")
        _tc(None, "qdisc", "del", "dev", self._root_ends[index], "root")
        self._cut.discard(index)
        return time.time()

    def remove(self) -> None:
        """Delete every namespace made (and so its veth pair); safe to call twice."""
        errors = []
        while self._made:
            name = self._made.pop()
            done = _ip("netns", "del", name, check=False)
            if done.returncode != 0:
                errors.append(f"{name}: {done.stderr.strip()}")
        for root_end in self._root_ends:
            # Normally gone with its peer's namespace; a half-made pair may be left.
            if _ip("link", "show", "dev", root_end, check=False).returncode == 0:
                _ip("link", "del", "dev", root_end, check=False)
        if errors:
            raise RuntimeError(f"could not delete namespaces: {'; '.join(errors)}")
