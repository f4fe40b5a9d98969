"""The dashboard at ``/``: the jobs, one job's story, and the buttons an operator needs; at
``/runs`` the workflow runs, and one run's story with its answer form and cancel button; at
``/schedules`` the cron schedules, and one schedule with its next fire times, latest
occurrences and pause, unpause, trigger and delete buttons.

Pages are rendered on the server by Jinja2 templates (``templates/``, autoescaped), the only
renderer: each page opens a live stream under ``/live/`` that sends the pieces of the page
that changed, rendered by the same templates, and htmx with its SSE extension (vendored in
``static/vendor/``) swaps them in. ``static/dashboard.js`` only acts: the buttons call the
JSON API with the login cookie and the page's CSRF token, so the page can do nothing a token
holder could not do with curl, and each button shows that curl command; the buttons that
cannot be taken back ask first. Nothing is loaded from anywhere but this server.

Modules: ``routes`` (the routes), ``login`` and ``login_cookie`` (logging the browser in and
out), ``jobs``, ``job``, ``runs``, ``run``, ``answers`` and ``schedules`` (a page or a
concept each); ``_render`` and ``_live`` are the renderer and the live streams. The server
mounts ``routes.ROUTES``; this package itself imports nothing, as the API's authentication
imports ``login_cookie`` from it.
"""
