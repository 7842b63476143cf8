"""`server(store, tenant=..., owner=...)`: the MCP SDK's low-level `Server` over one tenant.

The server lists `TOOLS` (read-only, each with its arguments' JSON Schema) and calls them
over `ConversationReads`. A refused call is a tool error, never a protocol error or a
stack trace: a result with `isError` whose structured content names the error's type
(`ValidationError`, `NotFound`, `KeyShredded`, ... from `mindstore.errors`), the argument
it concerns and a one-line message, so a model can correct its call. An error no
`MindstoreError` describes (a bug, or stored data no mindstore wrote) is logged on the
server with its traceback and answered as an `InternalError` without details.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any, Final

import mcp_types as types
from mcp.server import Server, ServerRequestContext

from mindstore.errors import MindstoreError
from mindstore.ids import check_name
from mindstore.mcp.arguments import ArgumentError
from mindstore.mcp.reads import ConversationReads
from mindstore.mcp.tools import TOOLS, JSONObject, Tool
from mindstore.store import Store
from mindstore.version import __version__

NAME: Final = "mindstore"
READ_ONLY: Final = types.ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
MAX_MESSAGE_CHARS: Final = 500

log = logging.getLogger(__name__)

McpServer = Server[dict[str, Any]]
"""The SDK's low-level server, with its default lifespan state."""


def _answer(content: JSONObject, *, error: bool = False) -> types.CallToolResult:
    text = json.dumps(content, ensure_ascii=True, separators=(",", ":"))
    return types.CallToolResult(
        content=[types.TextContent(text=text)], structured_content=content, is_error=error
    )


def failure(kind: str, argument: str | None, message: str) -> types.CallToolResult:
    """A tool error: its type, the argument it concerns (None: no one argument) and why."""
    return _answer(
        {"error": kind, "argument": argument, "message": message[:MAX_MESSAGE_CHARS]}, error=True
    )


def error_type(error: MindstoreError) -> str:
    """The error's class in `mindstore.errors` (an `ArgumentError` is a `ValidationError`)."""
    return next(
        c.__name__ for c in type(error).__mro__ if c.__module__ == MindstoreError.__module__
    )


def blamed_argument(tool: Tool, error: MindstoreError) -> str:
    """The argument an error concerns: its own (`ArgumentError`), the one its message
    starts with, else the tool's usual suspect."""
    if isinstance(error, ArgumentError):
        return error.argument
    names = tool.input_schema().get("properties")
    first = str(error).split(":", 1)[0].split(" ", 1)[0]
    if isinstance(names, dict) and first in names:
        return first
    return tool.blamed


def server(
    store: Store, *, tenant: str, owner: str | None = None, tools: Sequence[Tool] = TOOLS
) -> McpServer:
    """An MCP server over one tenant's conversations (one owner's, with `owner`), as the
    MCP SDK's `mcp.server.Server`: run it on stdio or streamable HTTP (`mindstore mcp`,
    `mindstore.mcp.http_app`), mount it, or drive it in process with `mcp.Client(server)`.

    Its tools only read: they write nothing but the search index (derived data a search
    brings up to date), make no key and change no tenant's encryption; a sealed tenant is
    read with the keyring given to `store`.

    Args:
        store: The store (`mindstore.connect`).
        tenant: The one tenant the server reads.
        owner: Only this owner's conversations (None: every owner of the tenant).
        tools: The tools it serves (default: `TOOLS`).

    Returns:
        A `mcp.server.Server`.

    Raises:
        ValidationError: `tenant` or `owner` is not a valid id.

    Example:
        ```python
        from mcp import Client

        async with Client(mindstore.mcp.server(store, tenant="acme")) as client:
            found = await client.call_tool("search_conversations", {"query": "lisbon"})
        ```
    """
    if owner is not None:
        check_name(owner, "owner")
    reads = ConversationReads(store.scoped(tenant, owner))
    by_name = {tool.name: tool for tool in tools}
    listing = types.ListToolsResult(
        tools=[
            types.Tool(
                name=tool.name,
                title=tool.title,
                description=tool.description,
                input_schema=tool.input_schema(),
                annotations=READ_ONLY,
            )
            for tool in tools
        ]
    )

    async def list_tools(
        _context: ServerRequestContext[dict[str, Any]], _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return listing

    async def call_tool(
        _context: ServerRequestContext[dict[str, Any]], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        tool = by_name.get(params.name)
        if tool is None:
            return failure("UnknownTool", None, f"no tool named {params.name[:100]!r}")
        try:
            result = await tool.call(reads, params.arguments)
        except MindstoreError as error:
            return failure(error_type(error), blamed_argument(tool, error), str(error))
        except Exception:
            log.exception("mindstore MCP tool %s failed", tool.name)
            return failure("InternalError", None, "the tool failed; the server's log says why")
        return _answer(result)

    where = tenant if owner is None else f"{tenant} (owner {owner})"
    return Server(
        NAME,
        version=__version__,
        instructions=(
            f"Read-only access to the stored conversations of tenant {where}: search them, "
            "list them, and read their messages a page at a time."
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
