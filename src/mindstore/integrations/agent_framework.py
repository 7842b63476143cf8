"""Microsoft Agent Framework history kept in mindstore tasks: `MindstoreHistoryProvider`.

A `HistoryProvider` (`get_messages` / `save_messages` of a session id, with the flags
`load_messages`, `store_inputs`, `store_outputs`, `store_context_messages`,
`store_context_from`) whose session is a task: `task_id_for(session_id)` (a session id
that is a key is its own task id), created on the first save with the view's owner and
the session id as given in its metadata (`session_id`), listed back by `list_sessions`.
Each `Message` is one typed message (`agent_framework_messages`: calls tracked in the
task's header, results answering them, reasoning; anything else kept so it comes back
exactly).

Saves are exactly-once:

* a message with a `message_id` is stored under an id derived from it and its content,
  so saving it again (a retried save, a replayed transcript) matches the stored id and
  stores nothing, even from two writers at once;
* a save first drops the messages the stored tail already ends with (Agent Framework's
  own `filter_new_messages`, as its in-memory provider does), so a replayed transcript
  without ids stores only what is new, while a repeated "yes" in a new turn is kept.

Usage and model: after a run, the run's usage (`AgentResponse.usage_details`) and the
model that answered (`model` of the last `ChatResponse`) are stored on the run's last
assistant message, so `analytics.usage(group_by="model")` counts them.

`max_messages` makes `get_messages` give the latest N messages, in order (`tasks.tail`).
`skip_excluded` leaves out of `get_messages` the messages a `CompactionProvider` marked
excluded (`additional_properties["_excluded"]` truthy), as the framework's own history
providers do; they stay stored, and `max_messages` then counts the messages given.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextvars import ContextVar
from typing import Any, ClassVar

from agent_framework import HistoryProvider, Message
from agent_framework._sessions import filter_new_messages

from mindstore.errors import Conflict, NotFound, ValidationError
from mindstore.integrations._derived_ids import derived_id, digest
from mindstore.integrations._session import conversations_of, scoped_owner
from mindstore.integrations.agent_framework_messages import (
    FORMAT,
    from_message,
    is_chat,
    to_message,
)
from mindstore.integrations.conversation_ids import task_id_for
from mindstore.model.messages import AnyMessage, Usage
from mindstore.protocols import TenantView
from mindstore.validation import check_bool

MARKER = {"integration": "agent-framework"}
"""Task metadata of a provider's task: `list_sessions` lists only these."""
EXCLUDED = "_excluded"
"""The `additional_properties` key by which Agent Framework's compaction marks a message
excluded from what a model is sent (its `_compaction.EXCLUDED_KEY`)."""
DEFAULT_SESSION = "default"
"""The session a `None` session id names (as Agent Framework's Cosmos provider does)."""

_RUN: ContextVar[tuple[Usage | None, str | None] | None] = ContextVar(
    "mindstore_agent_framework_run", default=None
)
"""The usage and model of the run whose `after_run` is saving (None: a plain save)."""


def _count(value: Any, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationError(f"invalid {what}: expected an integer >= 1, got {value!r}")
    return value


def _usage(details: Any) -> Usage | None:
    if not isinstance(details, dict):
        return None
    tokens_in, tokens_out = details.get("input_token_count"), details.get("output_token_count")
    if not isinstance(tokens_in, int) and not isinstance(tokens_out, int):
        return None
    return Usage(
        input_tokens=tokens_in if isinstance(tokens_in, int) and tokens_in > 0 else 0,
        output_tokens=tokens_out if isinstance(tokens_out, int) and tokens_out > 0 else 0,
    )


class MindstoreHistoryProvider(HistoryProvider):
    """An Agent Framework `HistoryProvider` kept in mindstore tasks (see the module doc).

    Args:
        view: A `TenantStore` (`store.scoped(tenant)`, optionally with an owner).
        source_id: The provider's id among the agent's context providers.
        owner: The owner new sessions get (an owner-scoped view's own by default).
        max_messages: Load only the latest N messages (None: all).
        load_messages: Load the history before a run.
        store_inputs: Store a run's input messages.
        store_context_messages: Store messages other context providers added.
        store_context_from: Only those of these providers.
        store_outputs: Store a run's response messages.
        skip_excluded: Leave out of `get_messages` the messages marked excluded (see the
            module doc).

    Example:
        ```python
        agent = Agent(client=client, context_providers=[MindstoreHistoryProvider(acme)])
        ```
    """

    DEFAULT_SOURCE_ID: ClassVar[str] = "mindstore"

    def __init__(
        self,
        view: TenantView,
        *,
        source_id: str | None = None,
        owner: str | None = None,
        max_messages: int | None = None,
        load_messages: bool = True,
        store_inputs: bool = True,
        store_context_messages: bool = False,
        store_context_from: set[str] | None = None,
        store_outputs: bool = True,
        skip_excluded: bool = False,
    ) -> None:
        super().__init__(
            source_id or self.DEFAULT_SOURCE_ID,
            load_messages=load_messages,
            store_inputs=store_inputs,
            store_context_messages=store_context_messages,
            store_context_from=store_context_from,
            store_outputs=store_outputs,
        )
        self.view = view
        self.owner = scoped_owner(view, owner)
        self.max_messages = _count(max_messages, "max_messages")
        self.skip_excluded = check_bool(skip_excluded, "skip_excluded")

    @staticmethod
    def task_id(session_id: str | None) -> str:
        """The task that holds a session.

        Args:
            session_id: The session id (None: the `default` session).

        Returns:
            `task_id_for(session_id)`.

        Raises:
            ValidationError: A bad session id.
        """
        return task_id_for(DEFAULT_SESSION if session_id is None else session_id, "session_id")

    async def _stored(self, session_id: str | None, count: int | None) -> list[AnyMessage]:
        tasks = self.view.tasks
        try:
            if count is None:
                return await tasks.messages(self.task_id(session_id))
            return await tasks.tail(self.task_id(session_id), count)
        except NotFound:
            return []

    async def get_messages(
        self, session_id: str | None, *, state: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[Message]:
        """The session's messages in order (the latest `max_messages` when set; without the
        ones marked excluded with `skip_excluded`).

        Args:
            session_id: The session id (None: the `default` session).
            state: The session's state for this provider (not used: history is in the task).
            **kwargs: Not used.

        Returns:
            The messages, exactly as they were saved.

        Raises:
            ValidationError: A bad session id.
        """
        wanted = count = self.max_messages
        while True:
            stored = await self._stored(session_id, count)
            messages = [to_message(m) for m in stored if is_chat(m)]
            if self.skip_excluded:
                messages = [m for m in messages if not m.additional_properties.get(EXCLUDED)]
            if wanted is None or count is None:
                return messages
            if len(messages) >= wanted or len(stored) < count:
                return messages[-wanted:]
            count *= 2  # some of the tail was left out: read further back

    async def save_messages(
        self,
        session_id: str | None,
        messages: Sequence[Message],
        *,
        state: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Append the messages the session does not end with already, in one atomic write
        (see the module doc).

        Args:
            session_id: The session id (None: the `default` session).
            messages: `Message`s.
            state: The session's state for this provider (not used).
            **kwargs: Not used.

        Raises:
            ValidationError: A bad session id or message (nothing is written).
        """
        task_id = self.task_id(session_id)
        if isinstance(messages, (str, bytes, dict)) or not isinstance(messages, Sequence):
            raise ValidationError("invalid messages: expected a list of Message")
        for index, message in enumerate(messages):
            if not isinstance(message, Message):
                raise ValidationError(
                    f"messages[{index}]: expected a Message, got {type(message).__name__}"
                )
        if not messages:
            return
        tail = [m for m in await self._stored(session_id, len(messages)) if is_chat(m)]
        fresh = filter_new_messages([to_message(m) for m in tail], list(messages))
        if not fresh:
            return
        converted = await self._converted(task_id, fresh)
        tasks = self.view.tasks
        try:
            await tasks.add_messages(task_id, converted)
        except NotFound:
            given = DEFAULT_SESSION if session_id is None else session_id
            try:
                await tasks.create(
                    task_id=task_id,
                    owner=self.owner,
                    metadata={**MARKER, "session_id": given},
                    messages=converted,
                )
            except Conflict:  # created meanwhile: a racing writer, a retry that landed
                await tasks.get(task_id)  # NotFound if it is another owner's
                await tasks.add_messages(task_id, converted)

    async def _converted(self, task_id: str, messages: Sequence[Message]) -> list[AnyMessage]:
        try:
            calls = {ref.id for ref in (await self.view.tasks.header(task_id)).open_tool_calls}
        except NotFound:
            calls = set()
        run = _RUN.get()
        last = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
        out: list[AnyMessage] = []
        for index, message in enumerate(messages):
            usage, model = run if run is not None and index == last else (None, None)
            named = message.message_id
            message_id = (
                derived_id(FORMAT, str(named), digest(message.to_dict()))
                if named is not None
                else None
            )
            out.append(
                from_message(
                    message,
                    f"messages[{index}]",
                    calls,
                    message_id=message_id,
                    usage=usage,
                    model=model,
                )
            )
        return out

    async def after_run(
        self, *, agent: Any, session: Any, context: Any, state: dict[str, Any]
    ) -> None:
        """Store the run's messages (the base class's rule), its usage and model on its
        last assistant message.

        Args:
            agent: The agent that ran.
            session: The agent session.
            context: The run's context (input messages, response).
            state: The session's state for this provider.
        """
        response = getattr(context, "response", None)
        raw = getattr(response, "raw_representation", None)
        model = getattr(raw, "model", None)
        token = _RUN.set(
            (
                _usage(getattr(response, "usage_details", None)),
                model if isinstance(model, str) else None,
            )
        )
        try:
            await super().after_run(agent=agent, session=session, context=context, state=state)
        finally:
            _RUN.reset(token)

    async def list_sessions(self) -> list[str]:
        """The view's sessions (their ids as given), sorted.

        Returns:
            The session ids.
        """
        return sorted(await conversations_of(self.view, MARKER["integration"]))

    async def clear(self, session_id: str | None) -> None:
        """Delete the session's history (its task).

        Args:
            session_id: The session id (None: the `default` session).

        Raises:
            ValidationError: A bad session id.
        """
        try:
            await self.view.tasks.delete(self.task_id(session_id))
        except NotFound:
            return
