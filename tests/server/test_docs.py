"""/docs in Chromium: the vendored viewer renders every operation of /openapi.json under the
server's Content-Security-Policy, with no violation reported and no error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import longcall

pytest.importorskip("longcall.server", reason="the server extra is not installed")

# Collects what the page's policy refused, before any of the page's own scripts run.
WATCH_VIOLATIONS = """
window.violations = [];
document.addEventListener("securitypolicyviolation", (e) =>
  window.violations.push(`${e.violatedDirective} ${e.blockedURI}`));
"""


def test_the_docs_page_keeps_a_strict_policy(tmp_path: Path, live: Any) -> None:
    """/docs and its files come from this server, under a policy with nothing inline."""
    app = longcall.App(f"sqlite:///{tmp_path}/docs.db")
    with live(app) as client:
        page = client.get("/docs")
        assets = [
            client.get(f"/docs/static/{name}")
            for name in ("docs.js", "docs.css", "swagger-ui/swagger-ui-bundle.js")
        ]
    app.close()
    policy = page.headers["content-security-policy"]
    assert "default-src 'self'" in policy and "unsafe" not in policy
    assert "frame-ancestors 'none'" in policy
    assert [a.status_code for a in assets] == [200, 200, 200]
    assert "<script>" not in page.text and "style=" not in page.text


def test_the_docs_render_every_operation_without_a_violation(
    tmp_path: Path, live: Any, browser: Any
) -> None:
    """Swagger UI lists each operation of the spec, opens one to try, and shows a model, with
    no Content-Security-Policy violation and no error in the console."""
    from playwright.sync_api import expect

    app = longcall.App(f"sqlite:///{tmp_path}/docs.db")
    with live(app) as client:
        spec = client.get("/openapi.json").json()
        context = browser.new_context()
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.add_init_script(WATCH_VIOLATIONS)
        page.goto(f"{client.base_url}/docs")

        wanted = {
            (method.upper(), path) for path, methods in spec["paths"].items() for method in methods
        }
        blocks = page.locator(".opblock")
        expect(blocks).to_have_count(len(wanted), timeout=15000)
        shown = blocks.evaluate_all(
            """els => els.map(e => [
                    e.querySelector('.opblock-summary-method').textContent,
                    e.querySelector('.opblock-summary [data-path]').dataset.path])"""
        )
        assert {tuple(pair) for pair in shown} == wanted

        # Open the jobs listing and try it: its state filter is a select, whose arrow the
        # style sheet draws (as is each path's copy button); then open a schema.
        listing = page.locator(".opblock-get", has=page.locator('[data-path="/v1/jobs"]'))
        listing.locator(".opblock-summary-control").click()
        listing.locator(".try-out__btn").click()
        expect(listing.locator("select").first).to_be_visible()
        schema = page.locator(".models .json-schema-2020-12").first
        schema.locator(".json-schema-2020-12-accordion").click()
        expect(schema.locator(".json-schema-2020-12-property").first).to_be_visible()
        page.wait_for_timeout(300)  # let the browser load (or refuse) what it just styled

        violations = page.evaluate("window.violations")
        context.close()
    app.close()
    assert violations == []
    assert errors == []
