"""What every route of the console shares: the `Console` the app holds (the read-only store,
the operators, their sessions, the templates, the settings), who is asking (`signed_in`,
`tenant_view`), the ids of the path, and the query's fields read as typed values (a bad
one is a `ValidationError` naming it, shown as a 400 page). The rule these enforce is
the app's (`web`): a tenant the operator may not see answers as one that does not exist.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import quote

from jinja2 import Environment
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from mindstore.analytics.incremental import DayFigures
from mindstore.analytics.periods import epoch_seconds
from mindstore.console.access import Credentials, LoginThrottle, Operator, Sessions
from mindstore.console.readonly import ReadOnlyStore, ReadOnlyTenant
from mindstore.console.security import COOKIE
from mindstore.errors import NotFound, ValidationError

INDEX: Final = re.compile(r"[0-9]{1,12}")

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


def console_of(request: Request) -> Console:
    console: Console = request.app.state.console
    return console


def _operator(request: Request) -> Operator | None:
    console = console_of(request)
    header = request.headers.get("authorization", "")
    if header[:7].lower() == "bearer ":
        return console.credentials.check(header[7:].strip())
    return console.sessions.get(request.cookies.get(COOKIE))


def root_of(request: Request) -> str:
    """Where the console is mounted (`""` at the top of its own server): every link and
    redirect starts with it, so the app works under a platform's prefix too."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def signed_in(handler: Handler) -> Handler:
    """The handler for an operator only: others go to the login form (a page) or get 401."""

    async def guarded(request: Request) -> Response:
        who = _operator(request)
        if who is None:
            if request.url.path.endswith((".csv", "/feed")):
                return PlainTextResponse("credential required", status_code=401)
            return RedirectResponse(f"{root_of(request)}/login", status_code=303)
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
        return console_of(request).store.tenant(tenant)
    except ValidationError:
        raise NotFound("tenant") from None


def query_param(request: Request, name: str) -> str | None:
    value = request.query_params.get(name, "").strip()
    return value or None


def _time_bound(request: Request, name: str) -> float | None:
    """The `?since=` or `?until=` bound as epoch seconds (a `ValidationError` naming the
    field for what is not a time a datetime can hold)."""
    return epoch_seconds(query_param(request, name), name)


def time_bounds(request: Request) -> tuple[float | None, float | None]:
    since, until = _time_bound(request, "since"), _time_bound(request, "until")
    if since is not None and until is not None and until <= since:
        raise ValidationError("until: must be later than since")
    return since, until


def message_index(request: Request, name: str, default: str | None = None) -> int | None:
    """A message index or count from `?{name}=`: ASCII digits only (`isdigit` also takes
    `²` and `①`, which `int` refuses)."""
    text = query_param(request, name) or default
    if text is None:
        return None
    if not INDEX.fullmatch(text):
        raise ValidationError(f"{name}: expected a message index (digits 0-9)")
    return int(text)
