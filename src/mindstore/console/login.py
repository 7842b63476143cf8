"""The console's login and logout: the token form, the credential check with its
throttle, the session cookie, and the refusals (a form from another origin, one too large
or with too many fields). docs/console.md ("Operators").
"""

from __future__ import annotations

from typing import Final
from urllib.parse import parse_qs, urlsplit

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from mindstore.console.handling import INDEX, console_of, root_of
from mindstore.console.rendering import page
from mindstore.console.security import COOKIE

MAX_FORM_BYTES: Final = 4096
"""The largest login form read; a longer one is refused by its `Content-Length`, or once
that many bytes have come, before the rest is read."""
MAX_FORM_FIELDS: Final = 4


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
    console = console_of(request)
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
    response = RedirectResponse(f"{root_of(request)}/", status_code=303)
    response.set_cookie(
        COOKIE,
        console.sessions.open(who),
        httponly=True,
        samesite="strict",
        secure=console.secure_cookies,
        path=f"{root_of(request)}/",
        max_age=int(console.sessions.max_age),
    )
    return response


async def logout(request: Request) -> Response:
    """Close the session and clear its cookie."""
    if _cross_site(request):
        return PlainTextResponse("cross-site form refused", status_code=403)
    console_of(request).sessions.close(request.cookies.get(COOKIE))
    response = RedirectResponse(f"{root_of(request)}/login", status_code=303)
    response.delete_cookie(COOKIE, path=f"{root_of(request)}/", httponly=True, samesite="strict")
    return response
