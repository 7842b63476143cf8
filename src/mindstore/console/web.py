"""The console's ASGI app: routes, the credential check, and the pages they render.

Every route but the login form and the static files needs an operator (a session cookie
from the login form, or `Authorization: Bearer <token>` for scripts); every route under
`/t/{tenant}/` also needs that operator to see the tenant. A tenant the operator may not see
answers exactly as a tenant that does not exist (404), and so does another tenant's task id,
because each read goes through that tenant's view, which cannot name another tenant's
documents. Handlers hold a `ReadOnlyTenant`, which has no write method.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final
from urllib.parse import parse_qs, quote, urlencode, urlsplit

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from mindstore.analytics.periods import TimeBound, epoch_seconds
from mindstore.console import conversation, reports
from mindstore.console.access import Credentials, Operator, Sessions
from mindstore.console.charts import Chart, draw
from mindstore.console.hits import pieces
from mindstore.console.readonly import ReadOnlyStore, ReadOnlyTenant
from mindstore.console.security import COOKIE, SecurityHeaders
from mindstore.errors import KeyringRequired, KeyShredded, NotFound, ValidationError
from mindstore.model.header import TaskState
from mindstore.search import SearchPage
from mindstore.store import Store
from mindstore.validation import check_int

PAGE_MESSAGES: Final = 100
"""Messages a task page shows: the last ones first, older ones a link away."""
PAGE_TASKS: Final = 50
FEED_MS: Final = 2000
"""How often (milliseconds) an open task page polls for new messages."""
FEED_MAX: Final = 200
"""The most messages one live-feed poll returns (a client far behind reloads instead)."""
PAGE_HITS: Final = 20
"""Search hits per results page."""
MAX_FORM_BYTES: Final = 4096
PERIODS: Final = ("day", "week", "month")

Handler = Callable[[Request], Awaitable[Response]]


@dataclass(frozen=True)
class Console:
    """What the handlers share: the read-only store, the operators and their sessions."""

    store: ReadOnlyStore
    credentials: Credentials
    sessions: Sessions
    pages: Environment
    secure_cookies: bool
    page_messages: int
    feed_ms: int


def _environment() -> Environment:
    pages = Environment(
        loader=PackageLoader("mindstore.console", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
    )
    pages.filters["q"] = lambda value: quote(str(value), safe="")
    pages.filters["pieces"] = pieces  # a snippet cut at its highlights, each piece escaped
    pages.globals["STATES"] = [state.value for state in TaskState]
    return pages


def _console(request: Request) -> Console:
    console: Console = request.app.state.console
    return console


def _operator(request: Request) -> Operator | None:
    console = _console(request)
    header = request.headers.get("authorization", "")
    if header[:7].lower() == "bearer ":
        return console.credentials.check(header[7:].strip())
    return console.sessions.get(request.cookies.get(COOKIE))


def _root(request: Request) -> str:
    """Where the console is mounted (`""` at the top of its own server): every link and
    redirect starts with it, so the app works under a platform's prefix too."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def page(request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
    """A rendered template (autoescaped: stored content is only ever text)."""
    body = (
        _console(request)
        .pages.get_template(template)
        .render(who=getattr(request.state, "operator", None), root=_root(request), **context)
    )
    return HTMLResponse(body, status_code=status)


def _not_found(request: Request, what: str = "page") -> HTMLResponse:
    return page(request, "error.html", 404, title="Not found", message=f"No such {what}.")


def signed_in(handler: Handler) -> Handler:
    """The handler for an operator only: others go to the login form (a page) or get 401."""

    async def guarded(request: Request) -> Response:
        who = _operator(request)
        if who is None:
            if request.url.path.endswith((".csv", "/feed")):
                return PlainTextResponse("credential required", status_code=401)
            return RedirectResponse(f"{_root(request)}/login", status_code=303)
        request.state.operator = who
        return await handler(request)

    guarded.__name__ = handler.__name__
    guarded.__doc__ = handler.__doc__
    return guarded


def tenant_view(request: Request) -> ReadOnlyTenant:
    """The `{tenant}` of the path as a read-only view, if this operator may see it; else
    NotFound, as for a tenant that does not exist."""
    tenant = request.path_params["tenant"]
    who: Operator = request.state.operator
    if not who.may_see(tenant):
        raise NotFound("tenant")
    try:
        return _console(request).store.tenant(tenant)
    except ValidationError:
        raise NotFound("tenant") from None


def _query(request: Request, name: str) -> str | None:
    value = request.query_params.get(name, "").strip()
    return value or None


def _time_bounds(request: Request) -> tuple[TimeBound, TimeBound]:
    return _query(request, "since"), _query(request, "until")


# ------------------------------------------------------------------------------ login
async def login_form(request: Request) -> Response:
    """The login form: a token field (the token never goes into a URL)."""
    return page(request, "login.html", error=None)


def _cross_site(request: Request) -> bool:
    """A form posted from another origin (the browser says so in `Origin`): refused, so no
    other site can log a browser in as its own operator, or out. Behind a proxy, the
    origin must match the `Host` or `X-Forwarded-Host` the console receives."""
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return origin == "null"
    hosts = {request.headers.get("host"), request.headers.get("x-forwarded-host")}
    return urlsplit(origin).netloc not in hosts - {None}


async def login(request: Request) -> Response:
    """Check the token; on success open a session and set its cookie."""
    if _cross_site(request):
        return PlainTextResponse("cross-site form refused", status_code=403)
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        return page(request, "login.html", 413, error="The form is too large.")
    fields = parse_qs(body.decode("utf-8", "replace"), max_num_fields=4)
    token = (fields.get("token") or [""])[0]
    console = _console(request)
    who = console.credentials.check(token)
    if who is None:
        return page(request, "login.html", 401, error="That token is not valid.")
    response = RedirectResponse(f"{_root(request)}/", status_code=303)
    response.set_cookie(
        COOKIE,
        console.sessions.open(who),
        httponly=True,
        samesite="strict",
        secure=console.secure_cookies,
        path=f"{_root(request)}/",
    )
    return response


async def logout(request: Request) -> Response:
    """Close the session and clear its cookie."""
    if _cross_site(request):
        return PlainTextResponse("cross-site form refused", status_code=403)
    _console(request).sessions.close(request.cookies.get(COOKIE))
    response = RedirectResponse(f"{_root(request)}/login", status_code=303)
    response.delete_cookie(COOKIE, path=f"{_root(request)}/", httponly=True, samesite="strict")
    return response


# ------------------------------------------------------------------------------ pages
@signed_in
async def tenants(request: Request) -> Response:
    """The tenants this operator may see, with owners, tasks, messages, tokens and cost."""
    console = _console(request)
    who: Operator = request.state.operator
    since, until = _time_bounds(request)
    names = who.visible(await console.store.tenants() if who.tenants is None else ())
    summaries = []
    for name in names:
        try:
            view = console.store.tenant(name)
        except ValidationError:
            continue
        owners = await view.top_owners(since=since, until=until)
        activity = await view.activity(period="month", since=since, until=until)
        summaries.append(
            {
                "tenant": name,
                "owners": len([o for o in owners if o.owner is not None]),
                "tasks": sum(o.tasks for o in owners),
                "messages": sum(a.messages for a in activity),
                "tokens": sum(o.tokens_in + o.tokens_out for o in owners),
                "cost": sum(o.cost for o in owners),
            }
        )
    return page(request, "tenants.html", tenants=summaries, since=since or "", until=until or "")


@signed_in
async def tasks(request: Request) -> Response:
    """A tenant's tasks, newest first, by owner, state and last update (`since`), one
    keyset page at a time."""
    view = tenant_view(request)
    owner, state, cursor = (_query(request, n) for n in ("owner", "state", "cursor"))
    since = _query(request, "since")
    seconds = epoch_seconds(since, "since")
    after = None if seconds is None else datetime.fromtimestamp(seconds, UTC)
    listed = await view.list_tasks(
        owner=owner, state=state, cursor=cursor, limit=PAGE_TASKS, updated_after=after
    )
    following = None
    if listed.next_cursor:
        kept = {k: v for k, v in (("owner", owner), ("state", state), ("since", since)) if v}
        following = urlencode({**kept, "cursor": listed.next_cursor})
    return page(
        request,
        "tasks.html",
        tenant=view.tenant,
        tasks=listed.items,
        owner=owner or "",
        state=state or "",
        since=since or "",
        following=following,
    )


def _before(request: Request) -> int | None:
    text = _query(request, "before")
    if text is None:
        return None
    if not text.isdigit() or len(text) > 12:
        raise ValidationError("before: expected a message index")
    return int(text)


@signed_in
async def task(request: Request) -> Response:
    """A task's conversation: its last messages (or those before `?before=N`), by role."""
    view = tenant_view(request)
    task_id = request.path_params["task_id"]
    size = _console(request).page_messages
    record = await view.get_task(task_id)
    before = _before(request)
    # the record's count fixes the indices: messages [start, stop) of an append-only array
    # (a range read touches only the pages it overlaps; newer messages come by the feed)
    count = record.seq
    stop = count if before is None else min(before, count)
    start = max(0, stop - size)
    messages = await view.read_range(task_id, start, stop) if stop > start else []
    shown = conversation.rows(messages, start)
    return page(
        request,
        "task.html",
        tenant=view.tenant,
        task=record,
        rows=shown,
        count=count,
        start=start,
        older=start if start > 0 else None,
        live=before is None,
        feed_ms=_console(request).feed_ms,
    )


@signed_in
async def feed(request: Request) -> Response:
    """The messages after index `?after=N`, as JSON, for the live feed's script."""
    view = tenant_view(request)
    task_id = request.path_params["task_id"]
    text = _query(request, "after") or "0"
    if not text.isdigit() or len(text) > 12:
        raise ValidationError("after: expected a message count")
    after = int(text)
    count = (await view.get_task(task_id)).seq
    if count < after or count - after > FEED_MAX:
        return JSONResponse({"count": count, "reload": True, "rows": []})
    messages = await view.read_range(task_id, after, count) if count > after else []
    rows = [row.to_json() for row in conversation.rows(messages, after)]
    return JSONResponse({"count": count, "reload": False, "rows": rows})


@signed_in
async def tree(request: Request) -> Response:
    """The dialog tree a task belongs to, from its root, each node linking to its task."""
    view = tenant_view(request)
    task_id = request.path_params["task_id"]
    top = await view.tree(task_id)
    return page(request, "tree.html", tenant=view.tenant, top=top, current=task_id)


async def _charts(
    view: ReadOnlyTenant, request: Request, keys: Iterable[str] = tuple(reports.CHARTS)
) -> list[Chart]:
    """The charts named by `keys` (each report read once), over the request's period and
    time bounds."""
    period = _query(request, "period") or "day"
    if period not in PERIODS:
        raise ValidationError(f"period: expected one of {', '.join(PERIODS)}")
    since, until = _time_bounds(request)
    wanted = list(keys)
    found: list[Chart] = []
    if "tokens" in wanted or "cost" in wanted:
        usage = await view.usage(
            group_by=("period", "model"), period=period, since=since, until=until
        )
        found += [reports.tokens(usage)] if "tokens" in wanted else []
        found += [reports.cost(usage)] if "cost" in wanted else []
    if "latency" in wanted:
        rows = await view.latency(group_by=("model",), period=None, since=since, until=until)
        found.append(reports.latency(rows))
    if "tools" in wanted:
        tools = await view.tools(group_by=(), period=None, since=since, until=until)
        found.append(reports.tools(tools))
    if "owners" in wanted:
        owners = await view.active_owners(period=period, since=since, until=until)
        found.append(reports.owners(owners))
    return found


@signed_in
async def charts(request: Request) -> Response:
    """Tokens and cost per model over time, latency percentiles, tools, active owners."""
    view = tenant_view(request)
    drawn = [(chart, draw(chart)) for chart in await _charts(view, request)]
    query = urlencode({k: v for k in ("period", "since", "until") if (v := _query(request, k))})
    return page(
        request,
        "charts.html",
        tenant=view.tenant,
        charts=drawn,
        query=query,
        period=_query(request, "period") or "day",
        since=_query(request, "since") or "",
        until=_query(request, "until") or "",
    )


@signed_in
async def chart_csv(request: Request) -> Response:
    """One chart's numbers as CSV."""
    view = tenant_view(request)
    key = request.path_params["chart"]
    if key not in reports.CHARTS:
        raise NotFound("chart")
    (chart,) = await _charts(view, request, [key])
    return Response(
        chart.csv(),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{view.tenant}-{key}.csv"'},
    )


@signed_in
async def search(request: Request) -> Response:
    """The tenant's messages matching `?q=`, best first, a page at a time (`?cursor=`).

    A query the search refuses (too long, a control character, nothing to find) or a
    cursor of another query shows the search's message on the page, with status 400. An
    encrypted tenant without the keyring, or a shredded one, answers as its other pages.
    """
    view = tenant_view(request)
    text = request.query_params.get("q", "")

    def results(
        status: int = 200, error: str | None = None, found: SearchPage | None = None
    ) -> Response:
        following = None
        if found is not None and found.next_cursor:
            following = urlencode({"q": text, "cursor": found.next_cursor})
        return page(request, "search.html", status, tenant=view.tenant, q=text, error=error,
                    hits=found.hits if found else [],
                    total=found.total if found else None, following=following)  # fmt: skip

    if not text.strip():
        return results()
    try:
        found = await view.search(text, limit=PAGE_HITS, cursor=_query(request, "cursor"))
    except ValidationError as error:
        return results(400, str(error))
    return results(found=found)


# ------------------------------------------------------------------------------ errors
async def _on_not_found(request: Request, error: Exception) -> Response:
    return _not_found(request)


async def _on_invalid(request: Request, error: Exception) -> Response:
    return page(request, "error.html", 400, title="Bad request", message=str(error))


async def _on_shredded(request: Request, error: Exception) -> Response:
    tenant = getattr(error, "tenant", "")
    return page(request, "shredded.html", 200, tenant=tenant)


async def _on_keyring(request: Request, error: Exception) -> Response:
    return page(
        request,
        "error.html",
        200,
        title="Encrypted tenant",
        message="This tenant's content is encrypted and the console was started "
        "without its keyring (--master-key, --key-vault).",
    )


async def _on_http(request: Request, error: Exception) -> Response:
    status = getattr(error, "status_code", 500)
    if status == 404:
        return _not_found(request)
    return PlainTextResponse(str(getattr(error, "detail", "")), status_code=status)


def app(
    store: Store,
    operators: Credentials | Iterable[Operator],
    *,
    secure_cookies: bool = False,
    page_messages: int = PAGE_MESSAGES,
    feed_ms: int = FEED_MS,
) -> SecurityHeaders:
    """The console as an ASGI app over `store`, for the given operators.

    Mount it in a platform's own app, or serve it with `mindstore console`. Set
    `secure_cookies` when it is served over HTTPS (the session cookie then has `Secure`).
    `page_messages`: messages per task page; `feed_ms`: how often an open task page asks
    for new messages.
    """
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
        exception_handlers={
            NotFound: _on_not_found,
            ValidationError: _on_invalid,
            KeyShredded: _on_shredded,
            KeyringRequired: _on_keyring,
            HTTPException: _on_http,
        },
    )
    web.state.console = Console(
        store=ReadOnlyStore(store),
        credentials=credentials,
        sessions=Sessions(),
        pages=_environment(),
        secure_cookies=secure_cookies,
        page_messages=page_messages,
        feed_ms=feed_ms,
    )
    return SecurityHeaders(web)


def new_token() -> str:
    """A fresh operator token (for `mindstore console` without an operators file)."""
    return secrets.token_urlsafe(24)


__all__ = ["app", "new_token"]
