"""A throwaway PostgreSQL cluster for the tests that stop or restart the server.

Such a test must never touch a server it did not start: the machine's own PostgreSQL (and
whatever ``LONGCALL_TEST_PG`` points at) is shared with CI and other work. So the test gets a
cluster of its own: ``initdb`` in a fresh temporary directory, a free port on 127.0.0.1, its
socket inside that directory, started, stopped and restarted with ``pg_ctl`` by the test, and
removed at the end. PostgreSQL refuses to run as root, so under root the cluster belongs to
the ``postgres`` user and every command runs as that user.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

# Settings for a cluster whose data nobody needs after the test: small, local only (127.0.0.1
# unless the test names other addresses), and quick to start. fsync stays on, so an immediate
# stop loses nothing a commit acknowledged.
SETTINGS = {
    "max_connections": "100",
    "shared_buffers": "'32MB'",
    "autovacuum": "off",
    "logging_collector": "off",
}


class ClusterUnavailable(Exception):
    """This machine cannot run a throwaway cluster; the message says why."""


def _bindir() -> Path:
    """The directory of initdb and pg_ctl: pg_config's answer, else Debian's newest version."""
    pg_config = shutil.which("pg_config")
    candidates: list[Path] = []
    if pg_config is not None:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False)
        if out.returncode == 0:
            candidates.append(Path(out.stdout.strip()))
    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]
    for directory in candidates:
        if (directory / "initdb").exists() and (directory / "pg_ctl").exists():
            return directory
    raise ClusterUnavailable(
        "initdb and pg_ctl were not found (pg_config --bindir, /usr/lib/postgresql/*/bin)"
    )


def _free_port(address: str) -> int:
    with socket.socket() as sock:
        sock.bind((address, 0))
        return int(sock.getsockname()[1])


class ThrowawayCluster:
    """A PostgreSQL cluster in a temporary directory, owned and removed by the test."""

    def __init__(
        self, *, listen: Sequence[str] = ("127.0.0.1",), trust: Sequence[str] = ()
    ) -> None:
        """``listen``: the addresses the server binds (the first is the one :meth:`url`
        names); ``trust``: networks (CIDR) whose TCP clients may log in without a password,
        beside 127.0.0.1, which initdb's ``-A trust`` already lets in."""
        self.bindir = _bindir()
        self.listen = tuple(listen)
        self._owner: pwd.struct_passwd | None = None
        if os.geteuid() == 0:
            try:
                self._owner = pwd.getpwnam("postgres")
            except KeyError:
                raise ClusterUnavailable("running as root, and there is no postgres user") from None
        self.root = Path(tempfile.mkdtemp(prefix="longcall-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = _free_port(self.listen[0])
        if self._owner is not None:
            os.chown(self.root, self._owner.pw_uid, self._owner.pw_gid)
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
                  "--no-sync", "--no-instructions")  # fmt: skip
        options = {
            **SETTINGS,
            "listen_addresses": f"'{','.join(self.listen)}'",
            "port": str(self.port),
            "unix_socket_directories": f"'{self.root}'",
        }
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.writelines(f"{name} = {value}\n" for name, value in options.items())
        with (self.data / "pg_hba.conf").open("a") as hba:
            hba.writelines(f"host all all {network} trust\n" for network in trust)

    def url(self, dbname: str = "postgres", *, host: str | None = None) -> str:
        """The URL of ``dbname`` on ``host`` (one of ``listen``; the first by default)."""
        return f"postgresql://postgres@{host or self.listen[0]}:{self.port}/{dbname}"

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server; ``immediate`` is a crash: no checkpoint, clients cut off."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def running(self) -> bool:
        status = self._run("pg_ctl", "-D", str(self.data), "status", check=False)
        return status.returncode == 0

    def remove(self) -> None:
        """Stop the server if it runs and delete every file of the cluster."""
        try:
            if self.data.exists() and self.running():
                self.stop("immediate")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def create_database(self, name: str) -> str:
        """A new database on this cluster; its URL."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True, connect_timeout=10) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def _run(self, tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [str(self.bindir / tool), *args]
        if self._owner is not None:
            command = ["runuser", "-u", self._owner.pw_name, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
        if check and done.returncode != 0:
            log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{tool} {' '.join(args)} failed: {done.stderr}{done.stdout}\n{log}")
        return done
