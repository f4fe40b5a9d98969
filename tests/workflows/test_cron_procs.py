"""Three scheduler processes on one database: every occurrence starts exactly one run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

from longcall import App
from longcall.cron.scheduler import Crons
from procs import sql_rows

SCRIPT = Path(__file__).resolve().with_name("cron_procs.py")
SCHEDULES = 50
SECONDS = 20.0


@pytest.mark.slow
def test_three_schedulers_fire_50_per_second_schedules_once_each_for_20_seconds(
    db_url: str, tmp_path: Path
) -> None:
    """50 schedules firing every second ('* * * * * *') and three scheduler processes for 20
    seconds: each schedule's occurrences are claimed without a gap from its first one to
    the end, each claim started one run, and no occurrence was claimed twice."""
    with App(db_url) as app:
        crons = Crons(app.runtime, app.workflows)
        made = [
            # 'slow' is registered only in the scheduler processes.
            crons.create(
                f"every-second-{i:02}",
                "slow",
                "* * * * * *",
                concurrency_policy="allow",
                check_workflow=False,
            )
            for i in range(SCHEDULES)
        ]
    first = {c.cron_id: c.next_fire_at for c in made}
    started = time.time()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for n in range(3):
            with (
                (tmp_path / f"{n}.out").open("wb") as out,
                (tmp_path / f"{n}.err").open("wb") as err,
            ):
                procs.append(
                    subprocess.Popen(
                        [sys.executable, str(SCRIPT), "--url", db_url, "--seconds", str(SECONDS)],
                        stdin=subprocess.DEVNULL,
                        stdout=out,
                        stderr=err,
                        env={**os.environ, "PYTHONUNBUFFERED": "1"},
                    )
                )
        for n, proc in enumerate(procs):
            assert proc.wait(SECONDS + 15) == 0, (tmp_path / f"{n}.err").read_text()
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait(10)
    claimed = [json.loads((tmp_path / f"{n}.out").read_text())["claimed"] for n in range(3)]

    fires = sql_rows(
        db_url,
        "SELECT f.cron_id, f.fire_at, f.outcome, f.run_id, r.cron_id, r.status "
        "FROM lc_cron_fires f LEFT JOIN lc_runs r ON r.run_id = f.run_id",
    )
    assert sum(claimed) == len(fires)
    by_cron: dict[str, list[float]] = defaultdict(list)
    for cron_id, fire_at, outcome, run_id, run_cron, status in fires:
        assert (outcome, run_cron, status) == ("fired", cron_id, "queued"), run_id
        by_cron[cron_id].append(float(fire_at))
    assert set(by_cron) == set(first)
    lasts = set()
    for cron_id, times in by_cron.items():
        times.sort()
        start = first[cron_id]
        assert start is not None
        assert times == [start + i for i in range(len(times))], cron_id  # no gap, no double
        assert times[-1] >= started + SECONDS - 1
        lasts.add(times[-1])
    assert max(lasts) - min(lasts) <= 1  # every schedule ran to the same end

    runs = sql_rows(
        db_url, "SELECT cron_id, COUNT(*), COUNT(DISTINCT run_id) FROM lc_runs GROUP BY cron_id"
    )
    assert {r[0]: (r[1], r[2]) for r in runs} == {
        cron_id: (len(times), len(times)) for cron_id, times in by_cron.items()
    }
