"""An MCP server over one tenant's stored conversations (`mindstore mcp`, docs/mcp.md).

`server(store, tenant=..., owner=...)` is the MCP SDK's low-level `Server` with three
read-only tools (search, read a conversation a page at a time, list conversations);
`http_app(store, credentials)` serves it over streamable HTTP behind bearer tokens, each
scoped to one tenant and optionally one owner. It needs the `mcp` extra
(``pip install 'mindstore[mcp]'``).

Modules: `arguments` (the tools' arguments, their schemas and checks; pure), `reads` (the
tenant view with no write verb), `tools` (the tool registry), `serving` (the server),
`credentials` (who may call it over HTTP; pure), `http` (the HTTP app).
"""

from __future__ import annotations

from mindstore.mcp.credentials import Credential, Credentials, credential, credentials_from_json
from mindstore.mcp.http import http_app
from mindstore.mcp.serving import server
from mindstore.mcp.tools import TOOLS, Tool, ToolSpec
from mindstore.tokens import new_token

__all__ = [
    "TOOLS", "Credential", "Credentials", "Tool", "ToolSpec", "credential",
    "credentials_from_json", "http_app", "new_token", "server",
]  # fmt: skip
