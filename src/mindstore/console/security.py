"""The headers every console response carries, and the session cookie's attributes.

The Content-Security-Policy allows scripts, styles, fetches and forms from the console's own
origin only and no inline script or style, so even markup that got into a page could not
run; images may also be `data:` URLs (the checked inline images of a conversation).
`SecurityHeaders` is a plain ASGI middleware so that every response gets the headers: pages,
static files, JSON, CSV, redirects and error pages alike.
"""

from __future__ import annotations

from typing import Final

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS: Final = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Cache-Control": "no-store",
}
HSTS: Final = "max-age=31536000"
"""`Strict-Transport-Security` with `secure_cookies` (served over HTTPS): a year."""
COOKIE: Final = "mindstore_console"
"""The session cookie: `HttpOnly`, `SameSite=Strict`, path `/` (and `Secure` when asked)."""


class SecurityHeaders:
    """Adds `HEADERS` (and `HSTS` when `hsts`) to every HTTP response of the wrapped app,
    replacing any it set."""

    def __init__(self, app: ASGIApp, *, hsts: bool = False) -> None:
        self.app = app
        self.headers = {**HEADERS, **({"Strict-Transport-Security": HSTS} if hsts else {})}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in self.headers.items():
                    headers[name] = value
            await send(message)

        await self.app(scope, receive, with_headers)
