"""The dashboard's routes: its pages, their live streams, logging in and out, and its static
files. Every page and stream is for a logged-in caller; anyone else goes to /login."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from longcall.app import App
from longcall.errors import CronNotFound, JobNotFound, RunNotFound, StoreError
from longcall.server.auth import Principal, authenticate
from longcall.server.dashboard import login
from longcall.server.dashboard._render import HEADERS, message_page
from longcall.server.dashboard.job import job_live, job_page
from longcall.server.dashboard.jobs import jobs_live, jobs_page
from longcall.server.dashboard.login_cookie import csrf_token, page_csrf
from longcall.server.dashboard.run import run_live, run_page
from longcall.server.dashboard.runs import runs_live, runs_page
from longcall.server.dashboard.schedules import (
    schedule_live,
    schedule_page,
    schedules_live,
    schedules_page,
)

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
            return message_page("Not found", heading, str(exc), who, 404, back=(back, label))
        except StoreError as exc:
            return message_page("Unavailable", "The store cannot be read", str(exc), who, 503)
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
    Route("/live/jobs", logged_in(jobs_live), methods=["GET"]),
    Route("/live/jobs/{job_id:path}", logged_in(job_live), methods=["GET"]),
    Route("/live/runs", logged_in(runs_live), methods=["GET"]),
    Route("/live/runs/{run_id:path}", logged_in(run_live), methods=["GET"]),
    Route("/live/schedules", logged_in(schedules_live), methods=["GET"]),
    Route("/live/schedules/{cron_id:path}", logged_in(schedule_live), methods=["GET"]),
    *login.ROUTES,
    Mount("/static", StaticFiles(directory=STATIC), name="static"),
]
