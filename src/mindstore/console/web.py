"""The console's ASGI app: routes, the credential check, and the pages they render.

Every route but the login form and the static files needs an operator (a session cookie
from the login form, or `Authorization: Bearer <token>` for scripts); every route under
`/t/{tenant}/` also needs that operator to see the tenant. A tenant the operator may not see
answers exactly as a tenant that does not exist (404), and so does another tenant's task id,
because each read goes through that tenant's view, which cannot name another tenant's
documents. Handlers hold a `ReadOnlyTenant`, which has no write method.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import secrets
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final
from urllib.parse import parse_qs, quote, urlencode, urlsplit

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware
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
from starlette.types import ASGIApp

from mindstore.analytics.incremental import DayFigures, day_aligned
from mindstore.analytics.periods import epoch_seconds
from mindstore.console import conversation, reports
from mindstore.console.access import (
    IDLE_SECONDS,
    MAX_AGE_SECONDS,
    Credentials,
    LoginThrottle,
    Operator,
    Sessions,
)
from mindstore.console.charts import Chart, draw
from mindstore.console.hits import pieces
from mindstore.console.readonly import ReadOnlyStore, ReadOnlyTenant, TaskFilters
from mindstore.console.security import COOKIE, SecurityHeaders
from mindstore.errors import (
    KeyringRequired,
    KeyShredded,
    MindstoreError,
    NotFound,
    Unavailable,
    ValidationError,
)
from mindstore.inert_text import visible
from mindstore.model.header import TaskState
from mindstore.model.messages import MessageRole
from mindstore.protocols import TaskRecord
from mindstore.search import SearchPage
from mindstore.store import Store
from mindstore.validation import check_int, check_number

PAGE_MESSAGES: Final = 100
"""Messages a task page shows: the last ones first, older ones a link away."""
PAGE_TASKS: Final = 50
TASKS_COUNTED: Final = 10_000
"""Where the task list's total stops counting ("10,000 or more"): one bounded count."""
TASK_ORDERS: Final = ("newest", "oldest")
FEED_MS: Final = 2000
"""How often (milliseconds) an open task page polls for new messages."""
FEED_MAX: Final = 200
"""The most messages one live-feed poll returns (a client far behind reloads instead)."""
CHARTS_WAIT: Final = 0.3
"""Seconds the charts page waits for a tenant's first figures before it answers that they
are being computed (and reloads itself until they are)."""
TREE_DETAILS: Final = 200
"""Nodes of a dialog tree shown with their task's title, state, times and tokens (one
header read each); further nodes show their id and counts."""
PAGE_HITS: Final = 20
SEARCH_FILTERS: Final = ("owner", "role", "since", "until", "task")
"""The search page's filters beside the query (the API's `search` takes them)."""
SEARCH_ROLES: Final = tuple(sorted(role.value for role in MessageRole))
"""Search hits per results page."""
MAX_FORM_BYTES: Final = 4096
"""The largest login form read; a longer one is refused by its `Content-Length`, or once
that many bytes have come, before the rest is read."""
MAX_FORM_FIELDS: Final = 4
INDEX: Final = re.compile(r"[0-9]{1,12}")
PERIODS: Final = ("day", "week", "month")
CHART_FILTERS: Final = ("period", "since", "until", "model", "owner")
"""The charts' query; tools are not filtered by owner, active owners not by model."""

Handler = Callable[[Request], Awaitable[Response]]


@dataclass(frozen=True)
class Console:
    """What the handlers share: the read-only store, the operators and their sessions."""

    store: ReadOnlyStore
    credentials: Credentials
    sessions: Sessions
    throttle: LoginThrottle
    pages: Environment
    secure_cookies: bool
    page_messages: int
    feed_ms: int
    charts_wait: float
    figures: dict[str, DayFigures] = field(default_factory=dict)
    """Each tenant's charts, kept by day and refreshed incrementally."""
    warming: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    """The refresh under way in the background, per tenant."""
    heavy: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(1))
    """Background refreshes run one at a time (a cold one reads every message)."""


class FiguresPending(Exception):
    """A tenant's charts are being computed for the first time (`done` of `total` tasks)."""

    def __init__(self, done: int, total: int) -> None:
        super().__init__(f"figures: {done} of {total} tasks")
        self.done, self.total = done, total


DOT_SEGMENTS: Final = frozenset({".", ".."})
"""Valid ids that a browser would resolve away in a path (`/t/./` is `/t/`)."""
DOT_MARK: Final = "~"
"""Written before a dot-only id in a path (`/t/~../`): outside the id alphabet, so no id
reads as another."""


def path_segment(value: object) -> str:
    """An id as one path segment of a link: percent-encoded, and `.` or `..` written
    `~.` or `~..` (a browser would drop a dot segment, even encoded as `%2E`)."""
    text = str(value)
    return DOT_MARK + text if text in DOT_SEGMENTS else quote(text, safe="")


def path_id(request: Request, name: str) -> str:
    """The id a path segment names (`path_segment` read back)."""
    text: str = request.path_params[name]
    return text[1:] if text[:1] == DOT_MARK and text[1:] in DOT_SEGMENTS else text


def _shown(value: object) -> object:
    """Every value a template writes: stored text with its control and bidi characters as
    visible escapes (`\\u202e`), as the CLI shows them, so no line reads otherwise than it
    holds; markup the templates made themselves as it is."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return visible(value)
    return value


def _environment() -> Environment:
    pages = Environment(
        loader=PackageLoader("mindstore.console", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        finalize=_shown,
    )
    pages.filters["q"] = path_segment
    pages.filters["as_text"] = conversation.as_text  # JSON-like values as readable text
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
    return page(
        request, "error.html", 404, title="Not found", message=f"No such {what}.", tenant=None
    )


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
    tenant = path_id(request, "tenant")
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


def _time_bound(request: Request, name: str) -> float | None:
    """The `?since=` or `?until=` bound as epoch seconds (a `ValidationError` naming the
    field for what is not a time a datetime can hold)."""
    return epoch_seconds(_query(request, name), name)


def _time_bounds(request: Request) -> tuple[float | None, float | None]:
    since, until = _time_bound(request, "since"), _time_bound(request, "until")
    if since is not None and until is not None and until <= since:
        raise ValidationError("until: must be later than since")
    return since, until


def _index(request: Request, name: str, default: str | None = None) -> int | None:
    """A message index or count from `?{name}=`: ASCII digits only (`isdigit` also takes
    `²` and `①`, which `int` refuses)."""
    text = _query(request, name) or default
    if text is None:
        return None
    if not INDEX.fullmatch(text):
        raise ValidationError(f"{name}: expected a message index (digits 0-9)")
    return int(text)


# ------------------------------------------------------------------------------ login
async def login_form(request: Request) -> Response:
    """The login form: a token field (the token never goes into a URL)."""
    return page(request, "login.html", error=None)


DEFAULT_PORTS: Final = {"http": 80, "https": 443}


def _origin_of(scheme: str, netloc: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of a URL's parts, the port the scheme's own when absent."""
    try:
        parts = urlsplit(f"{scheme}://{netloc}")
        port = parts.port or DEFAULT_PORTS.get(scheme)
    except ValueError:
        return None
    if not parts.hostname or port is None:
        return None
    return scheme, parts.hostname, port


def _cross_site(request: Request) -> bool:
    """A form posted from another origin (the browser says so in `Origin`): refused, so no
    other site can log a browser in as its own operator, or out. The origin's scheme, host
    and port must all be the console's own: the scheme it is served with and the `Host`
    (or, behind a proxy, `X-Forwarded-Host` and `X-Forwarded-Proto`) it receives."""
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return origin == "null"
    parts = urlsplit(origin)
    claimed = _origin_of(parts.scheme, parts.netloc)
    scheme = request.headers.get("x-forwarded-proto") or request.url.scheme
    own = {
        _origin_of(proto, host)
        for proto in {scheme, request.url.scheme}
        for host in (request.headers.get("host"), request.headers.get("x-forwarded-host"))
        if host
    }
    return claimed is None or claimed not in own


async def _small_body(request: Request, limit: int) -> bytes | None:
    """The request's body if it is at most `limit` bytes, else None, read no further
    than that: refused by its `Content-Length` before any byte is read, or as soon as the
    stream passes the limit (a chunked body has no length)."""
    declared = request.headers.get("content-length", "")
    if declared and (not INDEX.fullmatch(declared) or int(declared) > limit):
        return None
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            return None
    return bytes(body)


async def login(request: Request) -> Response:
    """Check the token; on success open a session and set its cookie."""
    if _cross_site(request):
        return PlainTextResponse("cross-site form refused", status_code=403)
    console = _console(request)
    client = request.client.host if request.client else ""
    wait = console.throttle.wait(client)
    if wait > 0:
        refused = page(request, "login.html", 429,
                       error="Too many failed logins: try again in a minute.")  # fmt: skip
        refused.headers["Retry-After"] = str(max(1, round(wait)))
        return refused
    body = await _small_body(request, MAX_FORM_BYTES)
    if body is None:
        return page(request, "login.html", 413, error="The form is too large.")
    try:
        fields = parse_qs(body.decode("utf-8", "replace"), max_num_fields=MAX_FORM_FIELDS)
    except ValueError:
        return page(request, "login.html", 400,
                    error=f"form: more than {MAX_FORM_FIELDS} fields.")  # fmt: skip
    token = (fields.get("token") or [""])[0]
    who = console.credentials.check(token)
    if who is None:
        console.throttle.failed(client)
        return page(request, "login.html", 401, error="That token is not valid.")
    response = RedirectResponse(f"{_root(request)}/", status_code=303)
    response.set_cookie(
        COOKIE,
        console.sessions.open(who),
        httponly=True,
        samesite="strict",
        secure=console.secure_cookies,
        path=f"{_root(request)}/",
        max_age=int(console.sessions.max_age),
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
    """The tenants this operator may see: each one's tasks, owners, messages, tokens and
    cost, from the task headers alone (tasks active in the period, with `since`/`until`).
    Opening it starts computing each tenant's charts in the background."""
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
        summaries.append(await console.store.totals(name, since, until))
        _warm(console, view)
    return page(request, "tenants.html", tenants=summaries, since=_query(request, "since") or "",
                until=_query(request, "until") or "")  # fmt: skip


def _text(request: Request, name: str) -> str | None:
    """A free-text `?{name}=` as sent: bytes that are not UTF-8 (a lone surrogate's) are a
    `ValidationError` naming the field, where the parsed query would have replaced them."""
    raw = request.scope.get("query_string", b"").decode("latin-1")
    sent = parse_qs(raw, encoding="utf-8", errors="surrogateescape").get(name)
    value = sent[-1].strip() if sent else ""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError(f"{name}: not valid UTF-8 text") from None
    return value or None


def _ordering(request: Request) -> bool:
    """`?order=`: newest first (the default) or `oldest` first."""
    order = _query(request, "order") or "newest"
    if order not in TASK_ORDERS:
        raise ValidationError(f"order: expected one of {', '.join(TASK_ORDERS)}")
    return order == "oldest"


@signed_in
async def tasks(request: Request) -> Response:
    """A tenant's tasks, newest (or oldest) first, filtered by owner prefix, state, title
    and last update (`since`, `until`), one keyset page at a time either way, with their
    total (counted up to `TASKS_COUNTED`)."""
    view = tenant_view(request)
    owner, title = _text(request, "owner"), _text(request, "title")
    state = _query(request, "state")
    cursor, back = _query(request, "cursor"), _query(request, "back")
    if cursor and back:
        raise ValidationError("back: give cursor or back, not both")
    oldest = _ordering(request)
    since, until = _time_bounds(request)
    filters = TaskFilters(
        state=state,
        owner_prefix=owner,
        title=title,
        updated_after=None if since is None else datetime.fromtimestamp(since, UTC),
        updated_before=None if until is None else datetime.fromtimestamp(until, UTC),
    )
    if back:  # the tasks before this page, read the other way round, nearest first
        listed = await view.list_tasks(
            filters, cursor=back, limit=PAGE_TASKS, oldest_first=not oldest
        )
        items = listed.items[::-1]
        earlier = listed.next_cursor
        later = listed.previous_cursor
        if earlier is None:  # back at the start: the first page, whole
            back = None
    if not back:
        listed = await view.list_tasks(
            filters, cursor=cursor, limit=PAGE_TASKS, oldest_first=oldest
        )
        items = listed.items
        earlier = listed.previous_cursor if cursor else None
        later = listed.next_cursor
    total = await view.count_tasks(filters, at_most=TASKS_COUNTED)
    forked = await view.forked([t.id for t in items])
    kept = {name: value for name in ("owner", "state", "title", "since", "until", "order")
            if (value := _query(request, name))}  # fmt: skip
    return page(
        request,
        "tasks.html",
        tenant=view.tenant,
        tasks=items,
        forked=forked,
        total=total,
        total_capped=total >= TASKS_COUNTED,
        owner=owner or "",
        state=state or "",
        title=title or "",
        since=_query(request, "since") or "",
        until=_query(request, "until") or "",
        oldest=oldest,
        following=urlencode({**kept, "cursor": later}) if later else None,
        preceding=urlencode({**kept, "back": earlier}) if earlier else None,
    )


@signed_in
async def task(request: Request) -> Response:
    """A task's conversation: its last messages (or those before `?before=N`), by role."""
    view = tenant_view(request)
    task_id = path_id(request, "task_id")
    size = _console(request).page_messages
    record = await view.get_task(task_id)
    before = _index(request, "before")
    # the record's count fixes the indices: messages [start, stop) of an append-only array
    # (a range read touches only the pages it overlaps; newer messages come by the feed)
    count = record.seq
    stop = count if before is None else min(before, count)
    start = max(0, stop - size)
    messages = await view.read_range(task_id, start, stop) if stop > start else []
    shown = conversation.rows(messages, start)
    # the model of the newest answer shown (the header keeps no model of its own)
    models = (getattr(m, "model_id", None) for m in reversed(messages))
    model = next((m for m in models if isinstance(m, str) and m), None)
    return page(
        request,
        "task.html",
        tenant=view.tenant,
        task=record,
        rows=shown,
        count=count,
        start=start,
        older=start if start > 0 else None,
        first_page=min(size, count),
        model=model,
        live=before is None,
        feed_ms=_console(request).feed_ms,
    )


@signed_in
async def feed(request: Request) -> Response:
    """The messages after index `?after=N`, as JSON, for the live feed's script."""
    view = tenant_view(request)
    task_id = path_id(request, "task_id")
    after = _index(request, "after", "0") or 0
    try:
        count = (await view.get_task(task_id)).seq
    except (KeyShredded, KeyringRequired) as error:
        # the script expects JSON, and says so on the page (a page open before a shred)
        return JSONResponse({"error": _sealed_message(error)}, status_code=_sealed_status(error))
    if count < after or count - after > FEED_MAX:
        return JSONResponse({"count": count, "reload": True, "rows": []})
    messages = await view.read_range(task_id, after, count) if count > after else []
    rows = [row.to_json() for row in conversation.rows(messages, after)]
    return JSONResponse({"count": count, "reload": False, "rows": rows})


@signed_in
async def tree(request: Request) -> Response:
    """The dialog tree a task belongs to, from its root, each node linking to its task."""
    view = tenant_view(request)
    task_id = path_id(request, "task_id")
    top = await view.tree(task_id)
    records: dict[str, TaskRecord] = {}
    waiting = [top] if top else []
    while waiting and len(records) < TREE_DETAILS:  # breadth first: the root's side first
        node = waiting.pop(0)
        with contextlib.suppress(NotFound):  # a node whose task went since the tree was read
            records[node["dialog_id"]] = await view.get_task(node["dialog_id"])
        waiting += node.get("children") or []
    return page(request, "tree.html", tenant=view.tenant, top=top, current=task_id,
                records=records)  # fmt: skip


def _figures(console: Console, view: ReadOnlyTenant) -> DayFigures:
    figures = console.figures.get(view.tenant)
    if figures is None:
        figures = console.figures[view.tenant] = view.day_figures()
    return figures


def _warm(console: Console, view: ReadOnlyTenant) -> DayFigures:
    """The tenant's figures, with a background refresh started unless one is under way
    (refreshes of all tenants take turns: `Console.heavy`)."""
    figures = _figures(console, view)
    running = console.warming.get(view.tenant)
    if running is None or running.done():

        async def refresh() -> None:
            async with console.heavy:
                await figures.refresh()

        console.warming[view.tenant] = asyncio.get_running_loop().create_task(refresh())
    return figures


async def _charts(
    view: ReadOnlyTenant,
    request: Request,
    keys: Iterable[str] = tuple(reports.CHARTS),
    wait: float | None = None,
) -> list[Chart]:
    """The charts named by `keys`, over the request's period and UTC days, from the
    tenant's kept figures (`DayFigures`: brought up to date first, incrementally). The
    first time, they are computed in the background: `FiguresPending` when that takes
    longer than `wait` seconds (None: as long as it takes)."""
    period = _query(request, "period") or "day"
    if period not in PERIODS:
        raise ValidationError(f"period: expected one of {', '.join(PERIODS)}")
    since, until = _time_bounds(request)
    for name, bound in (("since", since), ("until", until)):
        if not day_aligned(bound):
            raise ValidationError(f"{name}: charts take a UTC day (2026-10-01)")
    console = _console(request)
    figures = _warm(console, view)
    if not figures.refreshed:
        warming = console.warming[view.tenant]
        await asyncio.wait({warming}, timeout=wait)
        failed = warming.exception() if warming.done() and not warming.cancelled() else None
        if failed is not None:  # the store's own error: its page (the next read retries)
            raise failed
    if not figures.refreshed:
        raise FiguresPending(figures.done, figures.total)
    await figures.refresh()  # what changed since the last read: little, usually
    model, owner = _query(request, "model"), _query(request, "owner")
    wanted = list(keys)
    found: list[Chart] = []
    if "tokens" in wanted or "cost" in wanted:
        usage = figures.usage(period, since, until, model=model, owner=owner)
        found += [reports.tokens(usage)] if "tokens" in wanted else []
        found += [reports.cost(usage)] if "cost" in wanted else []
    if "latency" in wanted:
        found.append(reports.latency(figures.latency(since, until, model=model, owner=owner)))
    if "tools" in wanted:  # a tool call has no owner of its own
        found.append(reports.tools(figures.tools(since, until, model=model)))
    if "owners" in wanted:  # owners are not counted per model
        found.append(reports.owners(figures.active_owners(period, since, until, owner=owner)))
    return found


@signed_in
async def charts(request: Request) -> Response:
    """Tokens and cost per model over time, latency percentiles, tools, active owners."""
    view = tenant_view(request)
    progress: tuple[int, int] | None = None
    try:
        found = await _charts(view, request, wait=_console(request).charts_wait)
    except FiguresPending as pending:
        found, progress = [], (pending.done, pending.total)
    drawn = [(chart, draw(chart)) for chart in found]
    query = urlencode({k: v for k in CHART_FILTERS if (v := _query(request, k))})
    return page(
        request,
        "charts.html",
        tenant=view.tenant,
        charts=drawn,
        progress=progress,
        query=query,
        period=_query(request, "period") or "day",
        since=_query(request, "since") or "",
        until=_query(request, "until") or "",
        model=_query(request, "model") or "",
        owner=_query(request, "owner") or "",
    )


@signed_in
async def chart_csv(request: Request) -> Response:
    """One chart's numbers as CSV."""
    view = tenant_view(request)
    key = request.path_params["chart"]
    if key not in reports.CHARTS:
        raise NotFound("chart")
    try:
        (chart,) = await _charts(view, request, [key])
    except FiguresPending as pending:
        return PlainTextResponse(f"the charts are being computed ({pending}): try again",
                                 status_code=503, headers={"Retry-After": "2"})  # fmt: skip
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
    filters = {name: _query(request, name) or "" for name in SEARCH_FILTERS}

    def results(
        status: int = 200,
        error: str | None = None,
        found: SearchPage | None = None,
        titles: dict[str, str | None] | None = None,
    ) -> Response:
        following = None
        if found is not None and found.next_cursor:
            kept = {k: v for k, v in filters.items() if v}
            following = urlencode({"q": text, **kept, "cursor": found.next_cursor})
        hits = found.hits if found else []
        groups: dict[str, list[Any]] = {}
        for hit in hits:  # by task, in the order of each task's best hit
            groups.setdefault(hit.task_id, []).append(hit)
        return page(request, "search.html", status, tenant=view.tenant, q=text, error=error,
                    hits=hits, groups=list(groups.items()), titles=titles or {},
                    filters=filters, roles=SEARCH_ROLES,
                    total=found.total if found else None, following=following)  # fmt: skip

    if not text.strip():
        return results()
    try:
        since, until = _time_bounds(request)
        role = filters["role"]
        if role and role not in SEARCH_ROLES:
            raise ValidationError(f"role: expected one of {', '.join(SEARCH_ROLES)}")
        found = await view.search(
            text,
            limit=PAGE_HITS,
            cursor=_query(request, "cursor"),
            owner=filters["owner"] or None,
            roles=(role,) if role else None,
            since=None if since is None else datetime.fromtimestamp(since, UTC),
            until=None if until is None else datetime.fromtimestamp(until, UTC),
            task_ids=(filters["task"],) if filters["task"] else None,
        )
    except ValidationError as error:
        return results(400, str(error))
    titles: dict[str, str | None] = {}
    for task_id in dict.fromkeys(hit.task_id for hit in found.hits):
        try:
            titles[task_id] = (await view.get_task(task_id)).title
        except NotFound:  # deleted since it was indexed
            titles[task_id] = None
    return results(found=found, titles=titles)


# ------------------------------------------------------------------------------ errors
SHREDDED: Final = (
    "This tenant was shredded: its data keys were destroyed, so the content of its "
    "conversations can no longer be read, here or from any backup."
)
NO_KEYRING: Final = (
    "This tenant's content is encrypted and the console was started without its keyring "
    "(--master-key, --key-vault)."
)


def _sealed_message(error: Exception) -> str:
    return SHREDDED if isinstance(error, KeyShredded) else NO_KEYRING


def _sealed_status(error: Exception) -> int:
    """410 Gone for a shredded tenant's content, 503 for content the console cannot open."""
    return 410 if isinstance(error, KeyShredded) else 503


def _error_page(request: Request, status: int, title: str, message: str) -> HTMLResponse:
    """An error page, with the tenant's navigation when the path names a tenant this
    operator may see (the page of a tenant it may not see is the same as for none)."""
    tenant = None
    who = getattr(request.state, "operator", None)
    if "tenant" in request.path_params and who is not None:
        named = path_id(request, "tenant")
        tenant = named if who.may_see(named) else None
    return page(request, "error.html", status, title=title, message=message, tenant=tenant)


async def _on_not_found(request: Request, error: Exception) -> Response:
    return _not_found(request)


async def _on_invalid(request: Request, error: Exception) -> Response:
    return _error_page(request, 400, "Bad request", str(error))


async def _on_shredded(request: Request, error: Exception) -> Response:
    tenant = getattr(error, "tenant", "")
    return page(request, "shredded.html", 200, tenant=tenant)


async def _on_keyring(request: Request, error: Exception) -> Response:
    return _error_page(request, 200, "Encrypted tenant", NO_KEYRING)


async def _on_store_error(request: Request, error: Exception) -> Response:
    """Any other typed error of the store (a key vault that is not private, a provider
    that is away): its own page, named, rather than a bare 500."""
    status = 503 if isinstance(error, Unavailable) else 500
    return _error_page(request, status, type(error).__name__, str(error))


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
        exception_handlers={
            NotFound: _on_not_found,
            ValidationError: _on_invalid,
            KeyShredded: _on_shredded,
            KeyringRequired: _on_keyring,
            HTTPException: _on_http,
            MindstoreError: _on_store_error,
        },
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
