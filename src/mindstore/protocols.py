"""What the code above the repositories needs from a store: the typed seams, as Protocols.

The integrations, backup, retention and the workload loader are handed a store or a
tenant view (`store.scoped(tenant)`) by the application, but sit below `mindstore.store`
in the layers (docs/architecture.md, "Layers"): they must not import it. Each names here
the little it calls instead, so the type checker sees who uses what, and a change to the
task API that breaks a consumer fails `mypy`, not a user. `mindstore.store` checks that
`Store` and `TenantStore` satisfy these (`_conforms` there).

Layer: above `repositories` and `compression` (it names their types), a peer of
`services`, below everything that consumes a store (`integrations`, `backup`, `workload`,
`store` itself). Types only: nothing here runs. The records the views return (`TaskRecord`,
`Page`) are importable from here: above this layer only `store` imports a repository
module (tests/test_layers.py holds the rest to it).
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any, Protocol

from mindstore.compression.context import ContextWindow
from mindstore.compression.registry import StrategyArgument
from mindstore.compression.summarizer import Summarizer
from mindstore.compression.tokens import TokenCounter
from mindstore.formats.agent_state import AgentState
from mindstore.model.base import JSON
from mindstore.model.header import TaskHeader
from mindstore.model.messages import AnyMessage, CompressionMessage
from mindstore.repositories.records import Page as Page  # re-export: what the views return
from mindstore.repositories.records import TaskRecord as TaskRecord  # re-export, as `Page`


class HasDatabase(Protocol):
    """A `Store`: its database handle (pymongo's `AsyncDatabase`, or the embedded one;
    `mindstore.backends.connection.Backend.database`). Backup, erase, retention and the
    workload loader read and write collections through it directly."""

    @property
    def database(self) -> Any: ...


class ConversationTasks(Protocol):
    """`acme.tasks` as a conversation adapter uses it: read, append, take back, delete.
    The integrations' session tasks and the LangGraph saver call exactly these."""

    async def create(
        self,
        *,
        owner: str | None = None,
        title: str | None = None,
        messages: Sequence[AnyMessage] = (),
        task_id: str | None = None,
        metadata: JSON | None = None,
        replay: bool = False,
    ) -> TaskRecord: ...

    async def get(self, task_id: str) -> TaskRecord: ...

    async def header(self, task_id: str) -> TaskHeader: ...

    async def list(
        self, *, owner: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> Page[TaskRecord]: ...

    async def messages(
        self, task_id: str, start: int = 0, limit: int | None = None
    ) -> builtins.list[AnyMessage]: ...

    async def tail(self, task_id: str, count: int = 50) -> builtins.list[AnyMessage]: ...

    async def add_messages(
        self, task_id: str, messages: Sequence[AnyMessage]
    ) -> builtins.list[AnyMessage]: ...

    async def retract_last(
        self, task_id: str, expected_id: str | None = None
    ) -> AnyMessage | None: ...

    async def delete(self, task_id: str) -> bool: ...


class ContextTasks(ConversationTasks, Protocol):
    """`acme.tasks` with the context window (`mindstore.services.tasks.TaskService`), as
    the pydantic-ai history processor uses it."""

    async def context(
        self,
        task_id: str,
        *,
        max_tokens: int | None = None,
        strategy: StrategyArgument = None,
        summarizer: Summarizer | None = None,
        token_counter: TokenCounter | None = None,
        auto_compress: bool = True,
        safety_buffer: int = 0,
    ) -> ContextWindow: ...


class ChatTasks(ConversationTasks, Protocol):
    """`acme.tasks` as the LlamaIndex chat stores use it: also a checkpoint (statuses) and
    a redaction (deletes)."""

    async def add_compression_message(
        self,
        task_id: str,
        /,
        start_idx: int,
        end_idx: int,
        reason: str,
        strategies: Sequence[str],
        compressed_message_ids: Sequence[str],
        kept_message_ids: Sequence[str],
        cache: JSON | None = None,
        metadata: JSON | None = None,
        timestamp: float | None = None,
        message_id: str | None = None,
    ) -> CompressionMessage: ...

    async def redact(
        self,
        task_id: str,
        message_id: str,
        reason: str | None = None,
        part_index: int | None = None,
    ) -> AnyMessage: ...


class StateTasks(ChatTasks, Protocol):
    """`acme.tasks` as the Agent Framework session store and checkpoint storage use it: also
    one message by id and the task's agent state (a snapshot replaced in place)."""

    async def get_message(self, task_id: str, message_id: str) -> AnyMessage | None: ...

    async def save_agent_state(
        self, task_id: str, state: AgentState, *, messages: Sequence[AnyMessage] = ()
    ) -> None: ...

    async def agent_state(self, task_id: str) -> AgentState | None: ...


class TenantView(Protocol):
    """A `TenantStore` (`store.scoped(tenant, owner=...)`) as a session adapter sees it:
    whose data it is, and its tasks."""

    @property
    def tenant(self) -> str: ...

    @property
    def owner(self) -> str | None: ...

    @property
    def tasks(self) -> ConversationTasks: ...


class ContextView(TenantView, Protocol):
    """A tenant view whose tasks build context windows (pydantic-ai)."""

    @property
    def tasks(self) -> ContextTasks: ...


class ChatView(TenantView, Protocol):
    """A tenant view whose tasks take checkpoints and redactions (the LlamaIndex stores)."""

    @property
    def tasks(self) -> ChatTasks: ...


class StateView(TenantView, Protocol):
    """A tenant view whose tasks keep agent states and find messages by id (the Agent
    Framework session store and checkpoint storage)."""

    @property
    def tasks(self) -> StateTasks: ...


class SaverView(TenantView, Protocol):
    """A tenant view with its store's database: the LangGraph saver keeps checkpoints,
    writes and blobs in collections of its own next to the tasks."""

    @property
    def store(self) -> HasDatabase: ...
