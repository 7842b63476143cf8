"""The console's error pages: what each typed error of the store answers (404 for what
does not exist or may not be seen, 400 for a bad argument, the shredded tenant's page, the
missing keyring's, any other store error named), as the app's exception handlers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response

from mindstore.console.handling import path_id
from mindstore.console.rendering import page
from mindstore.errors import (
    KeyringRequired,
    KeyShredded,
    MindstoreError,
    NotFound,
    Unavailable,
    ValidationError,
)

SHREDDED: Final = (
    "This tenant was shredded: its data keys were destroyed, so the content of its "
    "conversations can no longer be read, here or from any backup."
)
NO_KEYRING: Final = (
    "This tenant's content is encrypted and the console was started without its keyring "
    "(--master-key, --key-vault)."
)


def sealed_message(error: Exception) -> str:
    return SHREDDED if isinstance(error, KeyShredded) else NO_KEYRING


def sealed_status(error: Exception) -> int:
    """410 Gone for a shredded tenant's content, 503 for content the console cannot open."""
    return 410 if isinstance(error, KeyShredded) else 503


def not_found(request: Request, what: str = "page") -> HTMLResponse:
    return page(
        request, "error.html", 404, title="Not found", message=f"No such {what}.", tenant=None
    )


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
    return not_found(request)


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
        return not_found(request)
    return PlainTextResponse(str(getattr(error, "detail", "")), status_code=status)


ERROR_HANDLERS: Final[
    dict[type[Exception], Callable[[Request, Exception], Awaitable[Response]]]
] = {
    NotFound: _on_not_found,
    ValidationError: _on_invalid,
    KeyShredded: _on_shredded,
    KeyringRequired: _on_keyring,
    HTTPException: _on_http,
    MindstoreError: _on_store_error,
}
"""The app's exception handlers, by the error they answer (Starlette picks the nearest
class of a raised error)."""
