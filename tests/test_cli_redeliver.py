"""``longcall jobs redeliver``: an orphaned job is sent again; anything else is refused."""

from __future__ import annotations

import json

from click.testing import CliRunner

import longcall
from longcall import CallIds, Delivery
from longcall.cli.main import main
from longcall.store import NewJob


def test_the_cli_redelivers_and_exits_5_for_a_job_it_cannot(db_url: str) -> None:
    """``longcall jobs redeliver`` readies an orphan (to another app with --app) and exits 5,
    changing nothing, for a delivery that is not orphaned or failed."""
    with longcall.App(db_url) as app:
        ids = CallIds("exports", "u", "s", "c", "i")
        app.store.create_job(NewJob("j1", "export", {}, ids, None), holder="t", dispatch_lease=0)
        app.complete("j1", 1)
        [claimed] = app.store.claim("w", limit=1, lease=60, app_name="exports")
        app.store.release(claimed, "w", error="no call", delay=0, delivery=Delivery.ORPHANED)

    result = CliRunner().invoke(
        main, ["jobs", "redeliver", "j1", "--app", "reimburse", "--database", db_url]
    )
    assert result.exit_code == 0, result.output
    answer = json.loads(result.output)  # not a terminal: JSON
    assert (answer["changed"], answer["job"]["appName"]) == (True, "reimburse")
    again = CliRunner().invoke(main, ["jobs", "redeliver", "j1", "--database", db_url])
    assert again.exit_code == 5, again.output
    assert "only an orphaned or failed delivery" in again.output
    with longcall.App(db_url) as app:
        job = app.get_job("j1")
        assert (job.app_name, job.delivery, job.last_error) == ("reimburse", Delivery.READY, None)
        [event] = [e for e in app.job_events("j1") if e.kind == "redelivered"]
        assert event.data == {"delivery": "orphaned", "error": "no call", "appName": "reimburse"}
