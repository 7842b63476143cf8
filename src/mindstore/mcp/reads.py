"""The MCP server's view of one tenant: the reads its tools need and nothing else.

The server never writes a conversation. Rather than trusting every tool to call only
reads, a tool never holds an object that can write: `ConversationReads` wraps the tenant
view (owner-scoped when the server is) in a name-mangled slot and exposes five reads by
name, so a write verb is not an attribute of anything a tool reaches, and mypy rejects a
call to one. A search brings the tenant's search index (derived data) up to date before it
reads; nothing else is written, and no key is made: a sealed tenant's keys come from the
store's keyring, which opens existing keys only when it reads.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Final

from mindstore.mcp.arguments import ArgumentError
from mindstore.memory import MemoryItem, MemoryItems
from mindstore.model.messages import AnyMessage
from mindstore.protocols import Page, TaskRecord
from mindstore.search import SearchPage
from mindstore.search.tokenize import terms
from mindstore.store import TenantStore

RECALL_OPTIONS: Final = {"mode": "lexical", "match": "all"}
"""Recall's options (`mode`, `match`) and what a store whose search has no such parameter
does (today's search: lexical, every word must match)."""
SEARCH_PARAMETERS: Final = frozenset(inspect.signature(TenantStore.search).parameters)
"""What the store's search accepts, read once: the tools pass `mode` and `match` through
when it takes them, and otherwise accept only the value it already behaves as."""


def recall_options(mode: str | None, match: str | None) -> dict[str, str]:
    """The recall options to pass to the store's search (`ArgumentError` for a value a
    search without that parameter cannot honour)."""
    options: dict[str, str] = {}
    for name, value in (("mode", mode), ("match", match)):
        if value is None:
            continue
        if name in SEARCH_PARAMETERS:
            options[name] = value
        elif value != RECALL_OPTIONS[name]:
            raise ArgumentError(
                name, f"this store's search supports only {name}={RECALL_OPTIONS[name]!r}"
            )
    return options


class ConversationReads:
    """One tenant's conversations (one owner's when `owner` is set), read-only."""

    __slots__ = ("__view", "owner", "tenant")

    def __init__(self, view: TenantStore) -> None:
        self.__view = view
        self.tenant: Final[str] = view.tenant
        self.owner: Final[str | None] = view.owner

    def _owner_filter(self, owner: str | None) -> str | None:
        """An owner argument, refused when the view is scoped to another owner."""
        if owner is not None and self.owner is not None and owner != self.owner:
            raise ArgumentError("owner", "this server is scoped to another owner")
        return owner

    async def search(
        self,
        query: str,
        *,
        mode: str | None,
        match: str | None,
        owner: str | None,
        roles: Sequence[str] | None,
        since: datetime | None,
        until: datetime | None,
        limit: int,
        cursor: str | None,
    ) -> SearchPage:
        """One page of hits, best first (`acme.search`)."""
        search: Callable[..., Awaitable[SearchPage]] = self.__view.search
        return await search(
            query, owner=self._owner_filter(owner), roles=roles, since=since, until=until,
            limit=limit, cursor=cursor, **recall_options(mode, match),
        )  # fmt: skip

    async def task(self, task_id: str) -> TaskRecord:
        """The conversation's record, without messages (another tenant's or owner's id:
        `NotFound`, as an id that does not exist)."""
        return await self.__view.tasks.get(task_id)

    async def read_range(self, task_id: str, start: int, stop: int) -> list[AnyMessage]:
        """Messages `[start, stop)`: only they are read."""
        return await self.__view.tasks.read_range(task_id, start, stop)

    async def list_tasks(
        self,
        *,
        owner: str | None,
        since: datetime | None,
        until: datetime | None,
        oldest_first: bool,
        limit: int,
        cursor: str | None,
    ) -> Page[TaskRecord]:
        """One keyset page of conversations, most recently updated first (`acme.tasks.list`)."""
        return await self.__view.tasks.list(
            owner=self._owner_filter(owner), updated_after=since, updated_before=until,
            oldest_first=oldest_first, limit=limit, cursor=cursor,
        )  # fmt: skip

    async def memories(
        self, namespace: Sequence[str], words: Sequence[str], *, limit: int, offset: int
    ) -> list[MemoryItem]:
        """The LangGraph-store memories under a namespace prefix (the view's owner's only,
        when it has one), unexpired: with `words`, those whose value holds any of them,
        most words first; then newest first. Read in the process (`mindstore.memory`):
        a value is never part of a query."""
        items = MemoryItems.of(self.__view.store, self.tenant, owner=self.owner)
        found = await items.under(tuple(namespace), omit_expired=True)
        ranked = [(matched(entry.item.value, words), entry.item) for entry in found]
        if words:
            ranked = [pair for pair in ranked if pair[0] > 0]
        ranked.sort(key=lambda pair: -pair[0])  # stable: newest first within a count
        return [item for _, item in ranked[offset : offset + limit]]


def matched(value: object, words: Sequence[str]) -> int:
    """How many of `words` (search terms) the value's text holds."""
    held = set(terms(json.dumps(value, ensure_ascii=False)))
    return sum(1 for word in words if word in held)
