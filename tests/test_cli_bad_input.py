"""Every mistake a user can make on the command line gets one clear line and its exit code.

Each case runs ``python -m longcall`` as a user would, in a process of its own with a time
limit, and fails on a traceback, a hang, exit 0 where an error was due, or a message that
does not say what was wrong. The codes are docs/cli.md's: 2 bad usage (an option, a URL that
cannot work, a missing extra), 3 no such job/run/schedule/source/token, 4 the database is
unreachable or unusable, 5 the state refuses the request.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import longcall
from conftest import IN_CI, PG_ADMIN_URL

HANG = 60  # seconds: far beyond what any of these takes; a case that runs longer hangs


@dataclass(frozen=True)
class Case:
    args: tuple[str, ...]
    code: int
    says: str  # a piece of the one line on stderr that names the mistake


def case(code: int, says: str, *args: str) -> Case:
    return Case(args, code, says)


REFUSED_PG = "postgresql://postgres@127.0.0.1:1/postgres"
MISSING_PG_DB = PG_ADMIN_URL.rpartition("/")[0] + "/longcall_no_such_database"
UNKNOWN_ROLE_PG = PG_ADMIN_URL.replace("postgres@", "longcall_no_such_role@", 1)

# {db}: a migrated SQLite database holding one job, "export:csv", with no session.
CASES = {
    # database URLs
    "unknown scheme": case(2, "mysql", "jobs", "list", "--database", "mysql://u@h/db"),
    "sqlite without a path": case(2, "sqlite", "jobs", "list", "--database", "sqlite://"),
    "sqlite folder missing": case(
        4, "read-only or missing", "jobs", "list", "--database", "sqlite:///no/such/dir/x.db"
    ),
    "pg refused": case(4, "Connection refused", "jobs", "list", "--database", REFUSED_PG),
    "pg refused, migrate": case(4, "Connection refused", "migrate", "--database", REFUSED_PG),
    "pg no such database": case(4, "does not exist", "jobs", "list", "--database", MISSING_PG_DB),
    "pg unknown role": case(4, "does not exist", "migrate", "--database", UNKNOWN_ROLE_PG),
    "pool_size not a number": case(
        2, "pool_size", "jobs", "list", "--database", REFUSED_PG + "?pool_size=many"
    ),
    # JSON
    "result not JSON": case(2, "--result", "jobs", "complete", "export:csv", "--result", "{bad"),
    "progress not JSON": case(2, "JSON", "jobs", "progress", "export:csv", "--data", "[1"),
    "hook body not JSON": case(2, "--body", "hooks", "sign", "batch", "--body", "nope"),
    # ids
    "no such job": case(3, "no job with id 'nope'", "jobs", "show", "nope"),
    "complete no such job": case(3, "nope", "jobs", "complete", "nope", "--result", "{}"),
    "no such run": case(3, "run-nope", "runs", "show", "run-nope"),
    "cancel no such run": case(3, "run-nope", "runs", "cancel", "run-nope"),
    "no such schedule": case(3, "nope", "cron", "show", "nope"),
    "no such hook source": case(3, "nosrc", "hooks", "rotate", "nosrc"),
    "no such hook secret": case(3, "nosrc", "hooks", "retire", "nosrc", "s-1"),
    "sign for no source": case(3, "nosrc", "hooks", "sign", "nosrc", "--body", "{}"),
    "no such token": case(3, "tok-nope", "tokens", "revoke", "tok-nope"),
    "watch no such job": case(3, "nope", "jobs", "watch", "nope", "--timeout", "5s"),
    # the job's state
    "extend a finished job": case(5, "already", "jobs", "extend", "done:1", "--deadline", "1h"),
    # durations
    "deadline not a duration": case(
        2, "not a duration", "jobs", "extend", "x", "--deadline", "soon"
    ),
    "serve tolerance": case(2, "not a duration", "serve", "--tolerance", "xyz"),
    "worker lease": case(2, "not a duration", "worker", "--app", "lcbad_app:app", "--lease", "x"),
    "worker poll": case(2, "not a duration", "worker", "--app", "lcbad_app:app", "--poll", "-1s"),
    "watch interval": case(2, "not a duration", "jobs", "watch", "x", "--interval", "often"),
    # cron expressions and zones
    "cron minute 61": case(2, "61", "cron", "preview", "61 * * * *"),
    "cron too few fields": case(2, "field", "cron", "preview", "* *"),
    "cron unknown zone": case(2, "Mars/Base", "cron", "preview", "0 2 * * *", "-z", "Mars/Base"),
    "cron preview after": case(2, "ISO 8601", "cron", "preview", "@daily", "--after", "tomorrow"),
    "cron add unknown workflow": case(
        3, "nope", "cron", "add", "n1", "nope", "@daily", "--app", "lcbad_app:app"
    ),
    # options
    "limit zero": case(2, "--limit", "jobs", "list", "--limit", "0"),
    "unknown state": case(2, "--state", "jobs", "list", "--state", "finished"),
    "port out of range": case(2, "--port", "serve", "--port", "70000"),
    "host that is not an address": case(2, "999.1.1.1", "serve", "--host", "999.1.1.1"),
    "host not on this machine": case(2, "10.255.255.1", "serve", "--host", "10.255.255.1"),
    "token for nobody": case(2, "--user", "tokens", "create"),
    "agent without app": case(2, "--app", "serve", "--agent", "x:y"),
    # --app
    "app module missing": case(2, "no_such_module", "worker", "--app", "no_such_module:app"),
    "app spec without a name": case(2, "package.module:name", "worker", "--app", "lcbad_app"),
    "app name missing": case(2, "no_app_here", "worker", "--app", "lcbad_app:no_app_here"),
    "app not an App": case(2, "not a longcall.App", "worker", "--app", "lcbad_app:not_an_app"),
    "app module raises": case(2, "ZeroDivisionError", "worker", "--app", "lcbad_broken:app"),
    "app on a refused pg": case(4, "Connection refused", "worker", "--app", "lcbad_refused:app"),
    "serve app on a refused pg": case(
        4, "Connection refused", "serve", "--port", "0", "--app", "lcbad_refused:app"
    ),
    "runs submit, app missing": case(2, "nowhere", "runs", "submit", "x", "--app", "nowhere:app"),
    "agent not a runner": case(
        2, "not an AgentRunner", "worker", "--app", "lcbad_app:app", "--agent", "lcbad_app:app"
    ),
}

APP_MODULES = {
    "lcbad_app": """
        import longcall
        app = longcall.App("sqlite:///{db}")
        not_an_app = 42

        @app.workflow("noop")
        def noop() -> None:
            return None
    """,
    "lcbad_broken": "app = 1 / 0\n",
    "lcbad_refused": f"""
        import longcall
        app = longcall.App("{REFUSED_PG}")
    """,
}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project folder: a migrated SQLite database with a job, and modules for ``--app``."""
    folder = tmp_path_factory.mktemp("project")
    db = folder / "longcall.db"
    with longcall.App(f"sqlite:///{db}") as app:

        @app.long_running(key="export:{fmt}")
        def export(fmt: str) -> str:
            """Exports."""
            return "started"

        export(fmt="csv")

        @app.long_running(key="done:{n}")
        def done(n: int) -> str:
            """Finishes at once."""
            return "started"

        done(n=1)
        app.complete("done:1", {"ok": True})
    for name, source in APP_MODULES.items():
        (folder / f"{name}.py").write_text(textwrap.dedent(source).replace("{db}", str(db)))
    return folder


def run_cli(
    folder: Path, *args: str, extra_path: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m longcall ARGS`` from ``folder``, its database the default, within HANG."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LONGCALL_")}
    env["LONGCALL_DATABASE_URL"] = f"sqlite:///{folder / 'longcall.db'}"
    env.pop("PYTHONPATH", None)
    if extra_path is not None:
        env["PYTHONPATH"] = extra_path
    try:
        return subprocess.run(
            [sys.executable, "-m", "longcall", *args],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=HANG,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"longcall {' '.join(args)} hung for {HANG} s")


def assert_one_clear_line(done: subprocess.CompletedProcess[str], code: int, says: str) -> None:
    output = done.stdout + done.stderr
    assert "Traceback" not in output, output
    assert done.returncode == code, f"exit {done.returncode}, wanted {code}:\n{output}"
    assert says in done.stderr, f"{says!r} is not in:\n{done.stderr}"


@pytest.mark.parametrize("name", list(CASES))
def test_a_mistake_gets_its_exit_code_and_one_line(name: str, project: Path) -> None:
    """Each mistake in the table exits with its documented code and says what was wrong."""
    mistake = CASES[name]
    assert_one_clear_line(run_cli(project, *mistake.args), mistake.code, mistake.says)


def test_a_missing_postgres_extra_is_bad_usage(project: Path, tmp_path: Path) -> None:
    """A PostgreSQL URL without the postgres extra names the install command, exit 2."""
    fake = tmp_path / "no_psycopg"
    (fake / "psycopg").mkdir(parents=True)
    (fake / "psycopg" / "__init__.py").write_text('raise ImportError("no psycopg here")\n')
    for args in (("migrate", "--database", REFUSED_PG), ("jobs", "list", "--database", REFUSED_PG)):
        done = run_cli(project, *args, extra_path=str(fake))
        assert_one_clear_line(done, 2, "pip install 'longcall[postgres]'")


def test_a_port_in_use_is_bad_usage_and_nothing_is_announced(project: Path) -> None:
    """serve on a port another process holds exits 2 naming the port, before 'serving'."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        done = run_cli(project, "serve", "--port", str(port))
    assert_one_clear_line(done, 2, f"127.0.0.1:{port}")
    assert "in use" in done.stderr and "serving" not in done.stderr


@pytest.fixture
def read_only(project: Path) -> Iterator[Path]:
    """A copy of the project's database that nobody may write, nor create files beside."""
    folder = project / "read-only"
    folder.mkdir()
    shutil.copy(project / "longcall.db", folder / "longcall.db")
    if os.geteuid() != 0:
        os.chmod(folder / "longcall.db", 0o444)
        os.chmod(folder, 0o555)
        undo = ["chmod", "-R", "u+w", str(folder)]
    else:  # root writes whatever the mode says: make the folder and file immutable instead
        made = subprocess.run(["chattr", "+i", str(folder / "longcall.db"), str(folder)],
                              capture_output=True, text=True, check=False)  # fmt: skip
        if made.returncode != 0:
            reason = f"cannot make a read-only file as root here: {made.stderr.strip()}"
            if IN_CI:
                pytest.fail(reason)
            pytest.skip(reason)
        undo = ["chattr", "-i", str(folder / "longcall.db"), str(folder)]
    try:
        yield folder / "longcall.db"
    finally:
        subprocess.run(undo, check=False)
        shutil.rmtree(folder)


def test_a_read_only_sqlite_file_says_so(project: Path, read_only: Path) -> None:
    """A database that cannot be written says it is read-only, not that it stayed locked."""
    url = f"sqlite:///{read_only}"
    for args in (("jobs", "list"), ("jobs", "complete", "export:csv", "--result", "{}")):
        done = run_cli(project, *args, "--database", url)
        assert_one_clear_line(done, 4, "read-only")
        assert "locked" not in done.stderr


def test_app_is_imported_from_the_current_folder(project: Path) -> None:
    """--app pkg.module:obj is found in the folder longcall runs from, without PYTHONPATH."""
    done = run_cli(project, "cron", "add", "n2", "noop", "@daily", "--app", "lcbad_app:app")
    assert done.returncode == 0, done.stderr


def test_python_dash_m_longcall_is_the_command(project: Path) -> None:
    """``python -m longcall`` is the ``longcall`` command, named so in its help."""
    done = run_cli(project, "--help")
    assert done.returncode == 0 and "Usage: longcall" in done.stdout
