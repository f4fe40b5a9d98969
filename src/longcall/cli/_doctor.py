"""``longcall doctor``: what is set up, what is missing, and what will refuse to work.

Each check is one row: ``ok``; ``warn`` (it works, but probably not as meant); ``fail``
(something will refuse to work until it is fixed). Nothing here writes: a SQLite file that
does not exist is reported, not created, and the schema is compared, never migrated.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from longcall.core.clock import SystemClock
from longcall.core.jobs import parse_duration
from longcall.core.webhook_secrets import check_secret
from longcall.errors import ConfigError, StoreError
from longcall.store import Store, latest_version, open_store

Status = Literal["ok", "warn", "fail"]

SETTINGS: dict[str, str] = {
    "LONGCALL_DATABASE_URL": "the database of every command, of the worker and the ADK plugin",
    "LONGCALL_APP": "the App that `worker` and `serve` load",
    "LONGCALL_AGENT": "the AgentRunner that `worker` and `serve` run",
    "LONGCALL_HOST": "the address `serve` binds",
    "LONGCALL_PORT": "the port `serve` listens on",
    "LONGCALL_WEBHOOK_TOLERANCE": "how old a signed delivery `serve` still accepts",
    "LONGCALL_DEMO_MODEL": "the Gemini model of `demo --adk` (with GOOGLE_API_KEY set)",
    "LONGCALL_TEST_PG": "the PostgreSQL server of longcall's own test suite",
}
SERVER_EXTRA = ("starlette", "uvicorn", "standardwebhooks", "prometheus_client")


@dataclass(frozen=True, slots=True)
class Check:
    """One row of the report."""

    check: str
    status: Status
    message: str


@dataclass(frozen=True, slots=True)
class Report:
    checks: list[Check]
    reachable: bool  # False: the database could not be opened or read at all

    @property
    def failed(self) -> bool:
        return any(c.status == "fail" for c in self.checks)


def mask_url(url: str) -> str:
    """The URL with any password (in the authority or a ``password=`` option) as ``***``."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return url
    if password is None and "password=" not in parts.query.lower():
        return url  # nothing to hide; keep the URL exactly as written (sqlite:////abs.db)
    netloc = parts.netloc
    if password is not None:
        userinfo, _, host = netloc.rpartition("@")
        user = userinfo.partition(":")[0]
        netloc = f"{user}:***@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(k.lower() == "password" for k, _ in pairs):
            masked = [(k, "***" if k.lower() == "password" else v) for k, v in pairs]
            query = urlencode(masked, safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def settings_checks(env: Mapping[str, str]) -> list[Check]:
    """One row per ``LONGCALL_*`` variable that is set, saying what it changes."""
    rows = []
    for name in sorted(k for k in env if k.startswith("LONGCALL_")):
        value = env[name]
        effect = SETTINGS.get(name)
        if effect is None:
            rows.append(Check(name, "warn", "longcall reads no such setting (a typo?)"))
            continue
        shown = mask_url(value) if name in ("LONGCALL_DATABASE_URL", "LONGCALL_TEST_PG") else value
        problem = _setting_problem(name, value)
        if problem:
            rows.append(Check(name, "fail", f"{shown!r}: {problem}"))
        else:
            rows.append(Check(name, "ok", f"{shown}: {effect}"))
    if not rows:
        rows.append(Check("settings", "ok", "no LONGCALL_* variable is set; the defaults apply"))
    return rows


def _setting_problem(name: str, value: str) -> str | None:
    if name == "LONGCALL_PORT":
        if not value.isdigit() or not 0 <= int(value) <= 65535:
            return "not a port number (0-65535)"
    elif name == "LONGCALL_WEBHOOK_TOLERANCE":
        try:
            parse_duration(value)
        except ValueError as exc:
            return str(exc)
    elif name in ("LONGCALL_APP", "LONGCALL_AGENT"):
        module, _, attr = value.partition(":")
        if not module or not attr:
            return "must look like package.module:name"
    return None


def server_extra_check() -> Check:
    missing = [m for m in SERVER_EXTRA if importlib.util.find_spec(m) is None]
    if missing:
        return Check(
            "server extra",
            "warn",
            f"not installed ({', '.join(missing)} missing): `serve` and `demo` need "
            "pip install 'longcall[server]'",
        )
    versions = ", ".join(
        f"{d} {importlib.metadata.version(d)}" for d in ("starlette", "uvicorn", "standardwebhooks")
    )
    return Check("server extra", "ok", f"installed ({versions})")


def _open(url: str, origin: str) -> tuple[Store | None, Check]:
    shown = mask_url(url)
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        path = parts.path[1:] if parts.path.startswith("/") else parts.path
        if path and not Path(path).exists():
            return None, Check(
                "database", "fail", f"{shown}: no such file (`longcall migrate` creates it)"
            )
    try:
        store = open_store(url, SystemClock())
    except ConfigError as exc:
        return None, Check("database", "fail", str(exc))
    except ImportError as exc:
        return None, Check("database", "fail", f"{shown}: {exc}")
    except StoreError as exc:
        return None, Check("database", "fail", f"{shown}: cannot connect: {exc}")
    return store, Check("database", "ok", f"{shown} ({store.dialect}, from {origin}) is reachable")


def _schema_check(store: Store) -> Check:
    current = store.schema_version()
    latest = latest_version(store.dialect)
    if current == latest:
        return Check("schema", "ok", f"version {current}, current")
    if current is None:
        return Check("schema", "fail", "no longcall schema; run `longcall migrate`")
    if current < latest:
        pending = ", ".join(str(v) for v in range(current + 1, latest + 1))
        return Check(
            "schema",
            "fail",
            f"version {current}; migration(s) {pending} pending: run `longcall migrate`",
        )
    return Check("schema", "fail", f"version {current} is newer than this longcall ({latest})")


def _webhook_checks(store: Store) -> list[Check]:
    secrets = store.hook_secrets()
    if not secrets:
        return [
            Check(
                "webhooks",
                "warn",
                "no source has a secret: every signed delivery is refused "
                "(`longcall hooks add SOURCE`)",
            )
        ]
    by_source: dict[str, list[str]] = {}
    for secret in secrets:
        by_source.setdefault(secret.source, []).append(secret.secret)
    rows = []
    for source, values in sorted(by_source.items()):
        name = f"webhooks {source}"
        broken = sum(1 for value in values if not _secret_works(value))
        if broken:
            rows.append(
                Check(
                    name,
                    "fail",
                    f"{broken} of {len(values)} secret(s) cannot verify anything; "
                    f"`longcall hooks rotate {source} --retire-others` replaces them",
                )
            )
        elif len(values) > 1:
            rows.append(
                Check(
                    name,
                    "ok",
                    f"{len(values)} active secrets (a rotation in progress: retire the old one "
                    "once the sender uses the new)",
                )
            )
        else:
            rows.append(Check(name, "ok", "1 active secret"))
    return rows


def _secret_works(secret: str) -> bool:
    """Whether a secret can verify deliveries."""
    try:
        check_secret(secret)
    except ConfigError:
        return False
    return True


def _token_check(store: Store) -> Check:
    active = [t for t in store.tokens() if t.revoked_at is None]
    admins = sum(1 for t in active if t.admin)
    if not active:
        return Check(
            "tokens",
            "warn",
            "no active API token: the jobs API and the dashboard refuse every request "
            "(`longcall tokens create --admin`)",
        )
    if not admins:
        return Check(
            "tokens",
            "warn",
            f"{len(active)} user token(s) but no admin token: nobody sees every user's jobs "
            "(`longcall tokens create --admin`)",
        )
    return Check("tokens", "ok", f"{len(active)} active token(s), {admins} admin")


def diagnose(url: str, env: Mapping[str, str], *, origin: str = "the caller") -> Report:
    """Every check, in the order they are shown; ``origin`` says where ``url`` came from."""
    rows = settings_checks(env)
    store, opened = _open(url, origin)
    rows.insert(0, opened)
    if store is None:
        rows.append(server_extra_check())
        return Report(rows, reachable=False)
    try:
        try:
            schema = _schema_check(store)
        except StoreError as exc:
            rows[0] = Check("database", "fail", f"{mask_url(url)}: cannot read: {exc}")
            rows.append(server_extra_check())
            return Report(rows, reachable=False)
        rows.insert(1, schema)
        if schema.status == "ok":
            rows.extend(_webhook_checks(store))
            rows.append(_token_check(store))
        rows.append(server_extra_check())
    finally:
        store.close()
    return Report(rows, reachable=True)
