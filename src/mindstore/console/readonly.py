"""The console's view of a store: the read methods it needs and nothing else.

The console never writes. Rather than trusting every handler to call only reads, it never
holds an object that can write: `ReadOnlyTenant` wraps one tenant's view and exposes the
reads the pages use, by name, so a write verb (`add_message`, `redact`, `delete`, `fork`,
...) is not an attribute of anything a handler can reach, and mypy rejects a call to one.
`READ_METHODS` lists them; a test checks that no write verb of `acme.tasks`, `acme.dialogs`
or `acme.analytics` is among them and that nothing else is exposed. (`search` brings the
tenant's search index, derived data the search maintains itself, up to date before it
reads: it writes no conversation.)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, TypedDict

from pydantic import ValidationError as ModelError

from mindstore.analytics.incremental import DayFigures
from mindstore.analytics.periods import TimeBound
from mindstore.analytics.rows import (
    ActiveOwnersRow,
    ActivityRow,
    LatencyRow,
    OwnerRow,
    ToolRow,
    UsageRow,
)
from mindstore.clock import as_utc
from mindstore.collection_names import TASKS
from mindstore.model.header import header_from_stored
from mindstore.model.messages import AnyMessage
from mindstore.protocols import Page, TaskRecord
from mindstore.search import SearchPage
from mindstore.search.modes import Match, Mode
from mindstore.store import Store, TenantStore

READ_METHODS: Final = frozenset(
    {
        "list_tasks",
        "count_tasks",
        "forked",
        "get_task",
        "read_range",
        "tree",
        "usage",
        "latency",
        "tools",
        "top_owners",
        "activity",
        "active_owners",
        "search",
        "day_figures",
    }
)
"""Every method `ReadOnlyTenant` has besides `tenant` (checked by the tests)."""
MAX_OWNERS: Final = 10_000
"""The most owners a tenant's summary ranks (the analytics report's own limit)."""


class TaskFilterArguments(TypedDict):
    state: str | None
    owner_prefix: str | None
    title: str | None
    updated_after: datetime | None
    updated_before: datetime | None


@dataclass(frozen=True)
class TaskFilters:
    """The task list's filters, as `tasks.list` and `tasks.count` take them (each checked
    there: a `ValidationError` names the bad one)."""

    state: str | None = None
    owner_prefix: str | None = None
    title: str | None = None
    updated_after: datetime | None = None
    updated_before: datetime | None = None

    def arguments(self) -> TaskFilterArguments:
        return TaskFilterArguments(
            state=self.state, owner_prefix=self.owner_prefix, title=self.title,
            updated_after=self.updated_after, updated_before=self.updated_before,
        )  # fmt: skip


class ReadOnlyTenant:
    """One tenant's data, read-only: the console's only way to it.

    The wrapped view is kept in a name-mangled slot so that a template or handler has no
    public path to it; each method forwards to one read of `acme.tasks`, `acme.dialogs` or
    `acme.analytics` and keeps its signature's meaning (and its errors: `NotFound` for
    another tenant's id, `ValidationError` for a bad argument).
    """

    __slots__ = ("__view", "tenant")

    def __init__(self, view: TenantStore) -> None:
        self.__view = view
        self.tenant: Final[str] = view.tenant

    async def list_tasks(
        self, filters: TaskFilters, *, cursor: str | None, limit: int, oldest_first: bool = False
    ) -> Page[TaskRecord]:
        """One keyset page of tasks, newest first (`acme.tasks.list`, with its filters)."""
        return await self.__view.tasks.list(
            cursor=cursor, limit=limit, oldest_first=oldest_first, **filters.arguments()
        )

    async def count_tasks(self, filters: TaskFilters, *, at_most: int) -> int:
        """How many tasks the listing's filters match, up to `at_most` (`acme.tasks.count`)."""
        return await self.__view.tasks.count(at_most=at_most, **filters.arguments())

    async def forked(self, task_ids: list[str]) -> set[str]:
        """The tasks among these whose dialog has a fork (`acme.dialogs.forked`)."""
        return await self.__view.dialogs.forked(task_ids)

    async def get_task(self, task_id: str) -> TaskRecord:
        """The task's record: header, counts and usage, without messages."""
        return await self.__view.tasks.get(task_id)

    async def read_range(self, task_id: str, start: int, stop: int) -> list[AnyMessage]:
        """Messages `[start, stop)`: only they are read (sealed pages by range)."""
        return await self.__view.tasks.read_range(task_id, start, stop)

    async def tree(self, dialog_id: str) -> dict[str, Any]:
        """The whole dialog tree `dialog_id` belongs to, from its root, nested
        (`acme.dialogs.root` and `tree_json`)."""
        dialogs = self.__view.dialogs
        return await dialogs.tree_json(await dialogs.root(dialog_id))

    async def usage(
        self, *, group_by: tuple[str, ...], period: str | None, since: TimeBound, until: TimeBound
    ) -> list[UsageRow]:
        """Tokens and cost (`acme.analytics.usage`)."""
        return await self.__view.analytics.usage(
            group_by=group_by, period=period, since=since, until=until
        )

    async def latency(
        self, *, group_by: tuple[str, ...], period: str | None, since: TimeBound, until: TimeBound
    ) -> list[LatencyRow]:
        """Response-time percentiles (`acme.analytics.latency`)."""
        return await self.__view.analytics.latency(
            group_by=group_by, period=period, since=since, until=until
        )

    async def tools(
        self, *, group_by: tuple[str, ...], period: str | None, since: TimeBound, until: TimeBound
    ) -> list[ToolRow]:
        """Tool calls and error rates (`acme.analytics.tools`)."""
        return await self.__view.analytics.tools(
            group_by=group_by, period=period, since=since, until=until
        )

    async def top_owners(self, *, since: TimeBound, until: TimeBound) -> list[OwnerRow]:
        """Owners with their tasks, tokens and cost (`acme.analytics.top_owners`)."""
        return await self.__view.analytics.top_owners(limit=MAX_OWNERS, since=since, until=until)

    async def activity(
        self, *, period: str, since: TimeBound, until: TimeBound
    ) -> list[ActivityRow]:
        """Tasks created, messages and active owners per period (`acme.analytics.activity`)."""
        return await self.__view.analytics.activity(period=period, since=since, until=until)

    async def active_owners(
        self, *, period: str, since: TimeBound, until: TimeBound
    ) -> list[ActiveOwnersRow]:
        """Owners with a message of their own per period (`acme.analytics.active_owners`)."""
        return await self.__view.analytics.active_owners(period=period, since=since, until=until)

    def day_figures(self) -> DayFigures:
        """The tenant's charts kept by day and brought up to date incrementally
        (`mindstore.analytics.incremental`: reads only)."""
        return DayFigures(self.__view.analytics)

    async def search(
        self,
        query: str,
        *,
        limit: int,
        cursor: str | None,
        owner: str | None = None,
        roles: tuple[str, ...] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        task_ids: tuple[str, ...] | None = None,
        mode: Mode | None = None,
        match: Match = "any",
    ) -> SearchPage:
        """One page of hits, best first (`acme.search`, with its filters, mode and match);
        a bad query or filter, or a cursor of another query: `ValidationError`. The search
        index is derived data the search brings up to date itself: no conversation is
        written."""
        return await self.__view.search(query, limit=limit, cursor=cursor, owner=owner,
                                        roles=roles, since=since, until=until,
                                        task_ids=task_ids, mode=mode, match=match)  # fmt: skip


@dataclass(frozen=True)
class TenantTotals:
    """A tenant's figures from its task headers alone (no message is read): every task
    and owner, whatever its usage."""

    tenant: str
    tasks: int = 0
    owners: int = 0
    messages: int = 0
    tokens: int = 0
    cost: float = 0.0


class ReadOnlyStore:
    """The store as the console sees it: tenant views that cannot write, and the list of
    tenants that hold tasks (for an operator who may see all of them)."""

    __slots__ = ("__store",)

    def __init__(self, store: Store) -> None:
        self.__store = store

    def tenant(self, tenant: str) -> ReadOnlyTenant:
        """One tenant's read-only view (the id is checked: `ValidationError`)."""
        return ReadOnlyTenant(self.__store.scoped(tenant))

    async def tenants(self) -> list[str]:
        """Every tenant with at least one task, sorted (one `distinct` on the tenant index)."""
        found = await self.__store.database[TASKS].distinct("tenant")
        return sorted(t for t in found if isinstance(t, str))

    async def totals(
        self, tenant: str, since: float | None = None, until: float | None = None
    ) -> TenantTotals:
        """The tenant's tasks (those active in `[since, until)`: created before `until`,
        updated at or after `since`), their distinct owners, and the messages, tokens and
        cost their headers count: one projected `find`, no message read."""
        query: dict[str, Any] = {"tenant": tenant}
        if since is not None:  # on the (tenant, updated_at) index
            query["updated_at"] = {"$gte": datetime.fromtimestamp(since, UTC)}
        fields = {"owner": 1, "seq": 1, "usage": 1, "created_at": 1}
        newest_first = [("updated_at", -1), ("_id", -1)]  # the index's own order
        found = (
            await self.__store.database[TASKS].find(query, fields).sort(newest_first).to_list(None)
        )
        if until is not None:  # no index has it: checked here, on what the index found
            end = datetime.fromtimestamp(until, UTC)
            found = [d for d in found if as_utc(d["created_at"]) < end]
        owners: set[Any] = set()
        messages = tokens = 0
        cost = 0.0
        for document in found:
            if document.get("owner") is not None:
                owners.add(document["owner"])
            try:
                header = header_from_stored({k: document[k] for k in ("seq", "usage")
                                             if k in document})  # fmt: skip
            except ModelError:
                continue  # a malformed header counts as a task, with nothing in it
            messages += header.seq
            tokens += header.usage.tokens_in + header.usage.tokens_out
            cost += header.usage.cost
        return TenantTotals(tenant, len(found), len(owners), messages, tokens, round(cost, 6))
