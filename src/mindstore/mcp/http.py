"""`http_app(store, credentials)`: the MCP server over streamable HTTP, behind bearer
tokens, as an ASGI app (Starlette).

Each request must carry `Authorization: Bearer <token>` of a `Credential`; it is then
handled by the server of that credential's scope (its tenant, and its owner when it has
one): one `server()` and one SDK session manager per scope, made up front. A session id
belongs to the scope that opened it, so a token of another scope cannot reach it (the
other scope's manager does not know it). A missing or unknown token gets 401 before any
byte of the body is read. Bound to a local address, the SDK's DNS-rebinding protection is
on (the `Host` and `Origin` must be local).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Final

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from mindstore.mcp.credentials import Credentials
from mindstore.mcp.serving import server
from mindstore.store import Store

PATH: Final = "/mcp"
LOCAL_HOSTS: Final = frozenset({"127.0.0.1", "localhost", "::1"})


def local_only() -> TransportSecuritySettings:
    """The SDK's own settings for a server bound to this machine: a local `Host` and
    `Origin` only (a web page cannot reach it by DNS rebinding)."""
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
    )


def _bearer(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            kind, _, token = value.decode("latin-1").partition(" ")
            return token.strip() if kind.lower() == "bearer" else None
    return None


class _Gate:
    """The `/mcp` endpoint: the credential's scope, or 401."""

    def __init__(
        self,
        credentials: Credentials,
        managers: dict[tuple[str, str | None], StreamableHTTPSessionManager],
    ) -> None:
        self.credentials = credentials
        self.managers = managers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        who = self.credentials.check(_bearer(scope))
        if who is None:
            refused = JSONResponse(
                {"error": "unauthorized", "message": "a valid bearer token is required"},
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer realm="mindstore"'},
            )
            await refused(scope, receive, send)
            return
        await self.managers[who.scope].handle_request(scope, receive, send)


def http_app(store: Store, credentials: Credentials, *, host: str = "127.0.0.1") -> Starlette:
    """The MCP server over streamable HTTP at `/mcp`, one scope per credential.

    Args:
        store: The store (`mindstore.connect`).
        credentials: Who may call it, each scoped to a tenant (and optionally an owner).
        host: The address it is served on; a local one turns on the SDK's DNS-rebinding
            protection.

    Returns:
        A Starlette app; its lifespan runs the session managers (serve it with its lifespan
        on, e.g. uvicorn's default).
    """
    security = local_only() if host in LOCAL_HOSTS else None
    managers = {
        scope: StreamableHTTPSessionManager(
            app=server(store, tenant=scope[0], owner=scope[1]), security_settings=security
        )
        for scope in dict.fromkeys(c.scope for c in credentials.credentials)
    }

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            for manager in managers.values():
                await stack.enter_async_context(manager.run())
            yield

    return Starlette(routes=[Route(PATH, endpoint=_Gate(credentials, managers))], lifespan=lifespan)
