"""`longcall serve` and `longcall hooks` as an operator uses them: real processes, real HTTP."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import longcall
import sample_agent
from longcall.cli.main import main
from procs import free_port, wait_until_healthy

pytest.importorskip("longcall.server", reason="the server extra is not installed")
import httpx


def test_serve_takes_a_delivery_signed_by_hooks_sign_and_stops_on_sigterm(tmp_path: Path) -> None:
    """hooks add, hooks sign, a POST to `longcall serve`, the job completes, SIGTERM exits 0."""
    url = f"sqlite:///{tmp_path / 'svc.db'}"
    with longcall.App(url) as app:

        @app.long_running(key="export:{fmt}")
        def export(fmt: str) -> str:
            """Exports."""
            return "started"

        export.invoke({"fmt": "csv"})
    runner = CliRunner()
    added = runner.invoke(main, ["hooks", "add", "batch", "--database", url, "-o", "json"])
    assert added.exit_code == 0, added.output
    assert json.loads(added.output)["secret"].startswith("whsec_")
    listed = runner.invoke(main, ["hooks", "list", "--database", url, "-o", "json"])
    assert [h["source"] for h in json.loads(listed.output)] == ["batch"]
    assert "whsec_" not in listed.output  # secrets are never listed
    body = '{"jobId": "export:csv", "type": "complete", "result": {"rows": 3}}'
    signed = runner.invoke(
        main, ["hooks", "sign", "batch", "--database", url, "--body", body, "-o", "json"]
    )
    assert signed.exit_code == 0, signed.output
    headers = json.loads(signed.output)
    assert set(headers) == {"webhook-id", "webhook-timestamp", "webhook-signature"}

    port = free_port()
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "longcall"),
            "serve",
            "--database",
            url,
            "--port",
            str(port),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until_healthy(base)
        got = httpx.post(
            f"{base}/v1/hooks/batch",
            content=body.encode(),
            headers={**headers, "content-type": "application/json"},
        )
        assert (got.status_code, got.json()["outcome"]) == (200, "applied")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    with longcall.App(url) as app:
        assert app.get_job("export:csv").result == {"rows": 3}


def test_hooks_retire_unknown_secret_exits_3(tmp_path: Path) -> None:
    """Retiring a secret the source does not have says so and exits 3."""
    url = f"sqlite:///{tmp_path / 'svc.db'}"
    longcall.App(url).close()
    result = CliRunner().invoke(main, ["hooks", "retire", "batch", "sec_nope", "--database", url])
    assert result.exit_code == 3 and "has no secret 'sec_nope'" in result.output


def test_tokens_create_list_revoke(tmp_path: Path) -> None:
    """A token is shown once, listed by id only, and revoked by id."""
    url = f"sqlite:///{tmp_path / 'svc.db'}"
    longcall.App(url).close()
    runner = CliRunner()
    made = runner.invoke(
        main, ["tokens", "create", "--user", "alice", "--database", url, "-o", "json"]
    )
    assert made.exit_code == 0, made.output
    created = json.loads(made.output)
    assert created["token"].startswith(f"lc_{created['tokenId']}_")
    listed = runner.invoke(main, ["tokens", "list", "--database", url, "-o", "json"])
    assert json.loads(listed.output) == [
        {"tokenId": created["tokenId"], "userId": "alice", "admin": False, "revoked": False}
    ]
    assert created["token"] not in listed.output
    with longcall.App(url) as app:
        assert app.store.token_info(created["token"]) is not None
    revoked = runner.invoke(main, ["tokens", "revoke", created["tokenId"], "--database", url])
    assert revoked.exit_code == 0
    with longcall.App(url) as app:
        assert app.store.token_info(created["token"]) is None
    assert runner.invoke(main, ["tokens", "create", "--database", url]).exit_code == 2


def test_serve_with_an_agent_runs_the_worker_and_resumes_over_http(tmp_path: Path) -> None:
    """serve --app --agent: an HTTP completion is resumed by the worker in the same process."""
    url = f"sqlite:///{tmp_path / 'svc.db'}"
    env = sample_agent.install(tmp_path, url)
    with longcall.App(url) as app:
        sample_agent.ask_for_export(app, user_id="ana", session_id="s1")
        _, token = app.store.create_token(user_id="ana")
    anas = longcall.job_id_for("export:csv", "ana")
    port = free_port()
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "longcall"),
            "serve",
            "--app",
            "sample_agent:app",
            "--agent",
            "sample_agent:runner",
            "--port",
            str(port),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until_healthy(base)
        done = httpx.post(
            f"{base}/v1/jobs/{anas}/complete",
            json={"result": {"rows": 4}},
            headers={"authorization": f"Bearer {token}"},
        )
        assert done.status_code == 200 and done.json()["changed"] is True
        with longcall.App(url) as app:
            deadline = time.monotonic() + 20
            while app.get_job(anas).delivery is not longcall.Delivery.DELIVERED:
                assert time.monotonic() < deadline, "the worker never resumed the session"
                time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        _, err = proc.communicate()
    assert "worker: deliveries to the agent, deadlines" in err


def test_serve_login_ttl_and_public_origin(tmp_path: Path) -> None:
    """--login-ttl sets how long a login lasts; --public-origin's form posts are accepted; the
    start-up line names the login page, never a token."""
    url = f"sqlite:///{tmp_path / 'svc.db'}"
    with longcall.App(url) as app:
        token = app.store.create_token(user_id="alice")[1]
    port = free_port()
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "longcall"),
            "serve",
            "--database",
            url,
            "--port",
            str(port),
            "--login-ttl",
            "2s",
            "--public-origin",
            "https://longcall.example.com",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until_healthy(base)
        proxied = httpx.post(
            f"{base}/login",
            data={"token": token},
            headers={"origin": "https://longcall.example.com"},
        )
        assert proxied.status_code == 303 and "max-age=2;" in proxied.headers["set-cookie"].lower()
        elsewhere = httpx.post(
            f"{base}/login", data={"token": token}, headers={"origin": "https://other.example.com"}
        )
        assert elsewhere.status_code == 403
        cookies = proxied.cookies
        assert httpx.get(f"{base}/v1/jobs", cookies=cookies).status_code == 200
        time.sleep(2.5)
        assert httpx.get(f"{base}/v1/jobs", cookies=cookies).status_code == 401
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        _, err = proc.communicate()
    assert f"open http://127.0.0.1:{port}/login and paste a token" in err
    assert token not in err


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--public-origin", "https://longcall.example.com/dashboard"),
        ("--public-origin", "ftp://longcall.example.com"),
        ("--public-origin", "https://longcall.example.com:99999"),
        ("--login-ttl", "0s"),
    ],
)
def test_serve_refuses_a_bad_public_origin_or_login_ttl(option: str, value: str) -> None:
    """A public origin that is not scheme://host[:port], or a login ttl of 0: exit 2, said."""
    result = CliRunner().invoke(main, ["serve", "--port", "0", option, value])
    assert result.exit_code == 2, result.output
    assert option in result.output
