"""Versions over HTTP and the CLI: ``GET /v1/runs?version=``, ``GET /v1/workflows/versions``,
``longcall runs versions`` and ``longcall runs list --version``, with their refusals."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner

import longcall
from longcall.cli.main import main
from workflows.version_procs import build_app

pytest.importorskip("longcall.server", reason="the server extra is not installed")

from server.conftest import Api


@pytest.fixture
def api(db_url: str, live: Any) -> Iterator[Api]:
    """The server's App registers version 2 of ``order``; a version-1 App submits too.
    alice submits two version-1 runs and one version-2 run, bob one version-2 run."""
    app = build_app(db_url, "2")
    old = build_app(db_url, "1")
    alice, bob = (app.store.create_token(user_id=u)[1] for u in ("alice", "bob"))
    admin = app.store.create_token(user_id=None, admin=True)[1]
    for n in range(2):
        old.submit_run("order", n, user_id="alice")
    app.submit_run("order", 2, user_id="alice")
    app.submit_run("order", 3, user_id="bob")
    old.close()
    try:
        with live(app) as client:
            yield Api(app, client, alice, bob, admin)
    finally:
        app.close()


def test_list_runs_by_version(api: Api) -> None:
    def listed(token: str, **params: Any) -> list[tuple[str, str]]:
        got = api.call("GET", "/v1/runs", token, params=params)
        assert got.status_code == 200, got.text
        return sorted((r["version"], r["userId"]) for r in got.json()["runs"])

    assert listed(api.admin, version="1") == [("1", "alice"), ("1", "alice")]
    assert listed(api.admin, version="2") == [("2", "alice"), ("2", "bob")]
    assert listed(api.bob, version="2") == [("2", "bob")]
    assert listed(api.bob, version="1") == []
    for bad in ("", "v 1", "x" * 65, "1/2"):
        got = api.call("GET", "/v1/runs", api.admin, params={"version": bad})
        assert got.status_code == 422, got.text
        assert got.json()["error"]["field"] == "version"
        assert "version" in got.json()["error"]["message"]


def test_the_version_summary_counts_what_the_caller_may_see(api: Api) -> None:
    got = api.call("GET", "/v1/workflows/versions", api.admin)
    assert got.status_code == 200, got.text
    rows = {v["version"]: v for v in got.json()["versions"]}
    assert set(rows) == {"1", "2"}
    assert (rows["1"]["workflowId"], rows["1"]["queued"], rows["1"]["active"]) == ("order", 2, 2)
    assert rows["2"]["queued"] == 2 and rows["2"]["running"] == 0
    mine = api.call("GET", "/v1/workflows/versions", api.bob).json()["versions"]
    assert [(v["version"], v["active"]) for v in mine] == [("2", 1)]
    assert api.call("GET", "/v1/workflows/versions", None).status_code == 401
    none = api.call("GET", "/v1/workflows/versions", api.admin, params={"workflow": "other"})
    assert none.status_code == 200 and none.json()["versions"] == []
    nul = api.call("GET", "/v1/workflows/versions", api.admin, params={"workflow": "a\x00"})
    assert nul.status_code == 400  # refused before the handler: NUL in a query string


def cli(app: longcall.App, *args: str) -> Any:
    return CliRunner().invoke(main, ["runs", *args, "--database", app.url, "-o", "json"])


def test_the_cli_lists_versions_until_they_drain(api: Api) -> None:
    got = cli(api.app, "versions")
    assert got.exit_code == 0, got.output
    rows = json.loads(got.output)
    assert [(r["version"], r["queued"], r["active"]) for r in rows] == [("1", 2, 2), ("2", 2, 2)]
    listed = cli(api.app, "list", "--version", "1")
    assert listed.exit_code == 0 and {r["version"] for r in json.loads(listed.output)} == {"1"}
    bad = cli(api.app, "list", "--version", "no way")
    assert bad.exit_code == 2 and "--version" in bad.output
    for run in api.app.list_runs(version="1"):
        api.app.cancel_run(run.run_id)
    got = cli(api.app, "versions", "--workflow", "order")
    assert [r["version"] for r in json.loads(got.output)] == ["2"]  # version 1 has drained
