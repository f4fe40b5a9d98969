"""``longcall serve`` in a process of its own, for the benchmarks that time a real server."""

from __future__ import annotations

import http.client
import socket
import subprocess
import sys
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """``longcall serve`` on ``url`` in a process of its own (with this process's limits),
    its output appended to ``log``."""

    def __init__(self, url: str, log: Path) -> None:
        self.port = free_port()
        self.log = log
        self.log_start = log.stat().st_size if log.exists() else 0
        command = [sys.executable, "-m", "longcall", "serve", "--database", url]
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                [*command, "--host", "127.0.0.1", "--port", str(self.port)],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 60
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                conn.request("GET", "/healthz")
                if conn.getresponse().status == 200:
                    conn.close()
                    return
            except OSError:
                pass
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.stop()
                raise SystemExit(f"the server did not come up; see {log}")
            time.sleep(0.1)

    def open_files_limit(self) -> str:
        for line in Path(f"/proc/{self.proc.pid}/limits").read_text().splitlines():
            if line.startswith("Max open files"):
                return " ".join(line.split()[3:5])
        return "?"

    def output(self) -> list[str]:
        """What the server wrote to its log since it started."""
        with self.log.open("rb") as log:
            log.seek(self.log_start)
            return log.read().decode(errors="replace").splitlines()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
