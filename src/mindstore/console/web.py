"""The console's ASGI app: its routes, error handlers, and settings over a store.

Every route but the login form and the static files needs an operator (a session cookie
from the login form, or `Authorization: Bearer <token>` for scripts); every route under
`/t/{tenant}/` also needs that operator to see the tenant. A tenant the operator may not see
answers exactly as a tenant that does not exist (404), and so does another tenant's task id,
because each read goes through that tenant's view, which cannot name another tenant's
documents. Handlers hold a `ReadOnlyTenant`, which has no write method.

The routes live by job beside this module: `handling` (what every route shares: the
`Console`, `signed_in`, `tenant_view`, the path's ids, the query's fields), `rendering`
(the templates, `page`), `login` (login and logout), `pages` (tenants, task list, task
and its live feed, dialog tree), `figures` (charts and their CSV), `search_page`,
`error_pages` (what each typed error answers). The names this module held before they
moved are imported here as themselves (`X as X`), so their import path still works.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable

from starlette.applications import Starlette
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from mindstore.console.access import (
    IDLE_SECONDS,
    MAX_AGE_SECONDS,
    Credentials,
    LoginThrottle,
    Operator,
    Sessions,
)
from mindstore.console.error_pages import ERROR_HANDLERS
from mindstore.console.error_pages import NO_KEYRING as NO_KEYRING
from mindstore.console.error_pages import SHREDDED as SHREDDED
from mindstore.console.figures import CHART_FILTERS as CHART_FILTERS
from mindstore.console.figures import CHARTS_WAIT, chart_csv, charts
from mindstore.console.figures import PERIODS as PERIODS
from mindstore.console.figures import FiguresPending as FiguresPending
from mindstore.console.handling import DOT_MARK as DOT_MARK
from mindstore.console.handling import DOT_SEGMENTS as DOT_SEGMENTS
from mindstore.console.handling import INDEX as INDEX
from mindstore.console.handling import Console
from mindstore.console.handling import Handler as Handler
from mindstore.console.handling import path_id as path_id
from mindstore.console.handling import path_segment as path_segment
from mindstore.console.handling import signed_in as signed_in
from mindstore.console.handling import tenant_view as tenant_view
from mindstore.console.login import DEFAULT_PORTS as DEFAULT_PORTS
from mindstore.console.login import MAX_FORM_BYTES as MAX_FORM_BYTES
from mindstore.console.login import MAX_FORM_FIELDS as MAX_FORM_FIELDS
from mindstore.console.login import login, login_form, logout
from mindstore.console.pages import FEED_MAX as FEED_MAX
from mindstore.console.pages import FEED_MS, PAGE_MESSAGES, feed, task, tasks, tenants, tree
from mindstore.console.pages import PAGE_TASKS as PAGE_TASKS
from mindstore.console.pages import TASK_ORDERS as TASK_ORDERS
from mindstore.console.pages import TASKS_COUNTED as TASKS_COUNTED
from mindstore.console.pages import TREE_DETAILS as TREE_DETAILS
from mindstore.console.readonly import ReadOnlyStore
from mindstore.console.rendering import environment as _environment
from mindstore.console.rendering import page as page
from mindstore.console.search_page import PAGE_HITS as PAGE_HITS
from mindstore.console.search_page import SEARCH_FILTERS as SEARCH_FILTERS
from mindstore.console.search_page import SEARCH_ROLES as SEARCH_ROLES
from mindstore.console.search_page import search
from mindstore.console.security import SecurityHeaders
from mindstore.errors import ValidationError
from mindstore.store import Store
from mindstore.validation import check_int, check_number


def app(
    store: Store,
    operators: Credentials | Iterable[Operator],
    *,
    secure_cookies: bool = False,
    page_messages: int = PAGE_MESSAGES,
    feed_ms: int = FEED_MS,
    charts_wait: float = CHARTS_WAIT,
    session_idle: float = IDLE_SECONDS,
    session_max: float = MAX_AGE_SECONDS,
    allowed_hosts: Iterable[str] | None = None,
) -> SecurityHeaders:
    """The console as an ASGI app over `store`, for the given operators.

    Mount it in a platform's own app, or serve it with `mindstore console`. Set
    `secure_cookies` when it is served over HTTPS (the session cookie then has `Secure`).
    `page_messages`: messages per task page; `feed_ms`: how often an open task page asks
    for new messages; `charts_wait`: how long (seconds) the charts page waits for a
    tenant's first figures before it says they are being computed (a CSV waits for them);
    `session_idle` and `session_max`: seconds after which a session expires, unused and
    at all; `allowed_hosts`: the host names the console answers to (the `Host` header,
    checked against DNS rebinding; None: any, for an app that checks it itself). With
    `secure_cookies`, responses also carry `Strict-Transport-Security`.
    """
    check_number(session_idle, "session_idle", minimum=1.0)
    check_number(session_max, "session_max", minimum=1.0)
    check_number(charts_wait, "charts_wait", minimum=0.0, maximum=600.0)
    check_int(page_messages, "page_messages", minimum=1, maximum=1000)
    check_int(feed_ms, "feed_ms", minimum=100)
    credentials = operators if isinstance(operators, Credentials) else Credentials(operators)
    routes = [
        Route("/", tenants),
        Route("/login", login_form, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/t/{tenant}/", tasks),
        Route("/t/{tenant}/tasks/{task_id}", task),
        Route("/t/{tenant}/tasks/{task_id}/feed", feed),
        Route("/t/{tenant}/tree/{task_id}", tree),
        Route("/t/{tenant}/charts", charts),
        Route("/t/{tenant}/search", search),
        Route("/t/{tenant}/charts/{chart}.csv", chart_csv),
        Mount("/static", StaticFiles(packages=[("mindstore.console", "static")]), name="static"),
    ]
    web = Starlette(
        routes=routes,
        exception_handlers=dict(ERROR_HANDLERS),
    )
    web.state.console = Console(
        store=ReadOnlyStore(store),
        credentials=credentials,
        sessions=Sessions(idle=session_idle, max_age=session_max),
        throttle=LoginThrottle(),
        pages=_environment(),
        secure_cookies=secure_cookies,
        page_messages=page_messages,
        feed_ms=feed_ms,
        charts_wait=charts_wait,
    )
    served: ASGIApp = web
    if allowed_hosts is not None:
        names = list(allowed_hosts)
        if not names or not all(isinstance(n, str) and n for n in names):
            raise ValidationError("allowed_hosts: expected host names")
        served = TrustedHostMiddleware(web, allowed_hosts=names, www_redirect=False)
    return SecurityHeaders(served, hsts=secure_cookies)


def new_token() -> str:
    """A fresh operator token (for `mindstore console` without an operators file)."""
    return secrets.token_urlsafe(24)


__all__ = ["app", "new_token"]
