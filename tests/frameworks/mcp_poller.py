"""A remote-task poller in its own process, for the restart test.

Run by path: ``python tests/frameworks/mcp_poller.py``; configured by the environment:
``LOCAL_URL`` (the local jobs' database), ``REMOTE_MCP_URL`` and ``REMOTE_TOKEN`` (the
remote server ``reports``), ``POLL_LEASE`` (seconds). It polls until killed.
"""

from __future__ import annotations

import asyncio
import os

from longcall import App
from longcall.mcp import RemoteServer, RemoteTaskPoller, RemoteTasks


async def main() -> None:
    with App(os.environ["LOCAL_URL"]) as app:
        server = RemoteServer(
            "reports",
            os.environ["REMOTE_MCP_URL"],
            headers={"authorization": f"Bearer {os.environ['REMOTE_TOKEN']}"},
        )
        remote = RemoteTasks(app, [server])
        lease = float(os.environ.get("POLL_LEASE", "30"))
        await RemoteTaskPoller(remote, base=0.1, cap=0.5, lease=lease, idle=0.05).run()


if __name__ == "__main__":
    asyncio.run(main())
