"""The dashboard at ``/``: the jobs, one job's story, and the buttons an operator needs; at
``/runs`` the workflow runs, and one run's story with its answer form and cancel button; at
``/schedules`` the cron schedules, and one schedule with its next fire times, latest
occurrences and pause, unpause, trigger and delete buttons.

Pages are rendered on the server, every value from the data through :func:`html.escape`;
``static/dashboard.js`` (and, for runs and schedules, ``dashboard_runs.js``) keeps them live
over the server-sent event streams and acts through the JSON API with the login cookie, so the
page can do nothing a token holder could not do with curl, and each button shows that curl
command; the buttons that cannot be taken back ask first. Nothing is loaded from anywhere but
this server.

This module routes the pages; they live beside it: ``dashboard_login`` (logging the browser
in and out), ``dashboard_page`` (the layout and shared pieces), ``dashboard_jobs``,
``dashboard_runs`` and ``dashboard_schedules``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from html import escape
from pathlib import Path

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from longcall.app import App
from longcall.errors import CronNotFound, JobNotFound, RunNotFound, StoreError
from longcall.server import dashboard_login
from longcall.server.auth import Principal, authenticate
from longcall.server.dashboard_jobs import job_page, jobs_page
from longcall.server.dashboard_page import HEADERS, layout
from longcall.server.dashboard_runs import run_page, runs_page
from longcall.server.dashboard_schedules import schedule_page, schedules_page
from longcall.server.login_cookie import csrf_token, page_csrf

STATIC = Path(__file__).with_name("static")
Page = Callable[[Request, App, Principal], Awaitable[Response]]
# What a page says when the object it shows is not there, or not the caller's to see: its
# heading, and the list to go back to.
MISSING: dict[type[Exception], tuple[str, str, str]] = {
    JobNotFound: ("No such job", "/", "Jobs"),
    RunNotFound: ("No such run", "/runs", "Runs"),
    CronNotFound: ("No such schedule", "/schedules", "Schedules"),
}


def logged_in(handler: Page) -> Callable[[Request], Awaitable[Response]]:
    """A page for a logged-in caller; anyone else goes to /login."""

    async def endpoint(request: Request) -> Response:
        who = await authenticate(request)
        if isinstance(who, Response):
            if who.status_code == 401:
                return RedirectResponse("/login", status_code=303, headers=HEADERS)
            return who
        # The page carries its login's CSRF token for its buttons (none when a bearer header,
        # not the cookie, authenticated the request).
        login_id = getattr(request.state, "login_id", None)
        csrf = page_csrf.set(csrf_token(login_id) if login_id else None)
        try:
            return await handler(request, request.app.state.longcall, who)
        except (JobNotFound, RunNotFound, CronNotFound) as exc:
            heading, back, label = MISSING[type(exc)]
            text = escape(str(exc))
            main = f'<main><h1>{heading}</h1><p>{text}</p><a href="{back}">{label}</a></main>'
            return layout("Not found", main, who, 404)
        except StoreError as exc:
            main = f"<main><h1>The store cannot be read</h1><p>{escape(str(exc))}</p></main>"
            return layout("Unavailable", main, who, 503)
        finally:
            page_csrf.reset(csrf)

    return endpoint


ROUTES: list[BaseRoute] = [
    Route("/", logged_in(jobs_page), methods=["GET"]),
    Route("/jobs/{job_id:path}", logged_in(job_page), methods=["GET"]),
    Route("/runs", logged_in(runs_page), methods=["GET"]),
    Route("/runs/{run_id:path}", logged_in(run_page), methods=["GET"]),
    Route("/schedules", logged_in(schedules_page), methods=["GET"]),
    Route("/schedules/{cron_id:path}", logged_in(schedule_page), methods=["GET"]),
    *dashboard_login.ROUTES,
    Mount("/static", StaticFiles(directory=STATIC), name="static"),
]
