"""Agents' dialog aliases on the store: `acme.agents.get(name)`.

One small document per agent (`agents` collection, `_id` = "<tenant>/<agent name>")
holds its aliases and the active one; the dialogs are ordinary stored dialogs
(`acme.dialogs`), which the document only names. Every change is one write: the first
an insert (its unique `_id` is the guard), every later one an `update_one` whose filter
pins the `version` it was planned from and whose `$set` writes the new state and
`version + 1`. A writer that lost a race matches nothing, re-reads and re-plans (bounded,
jittered), so two coroutines or processes changing one agent never lose an update.

Dialog first, pointer second: `open` and `fork` store the dialog, then claim the alias;
if the claim fails (the alias was taken meanwhile) the new dialog is deleted again, and a
crash in between leaves an unreferenced dialog owned by the agent, never an alias that
points at nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from pymongo.errors import DuplicateKeyError

from mindstore.clock import utcnow
from mindstore.collection_names import AGENTS
from mindstore.compression.managers import ContextManager
from mindstore.errors import (
    Conflict,
    InvalidTransition,
    MindstoreError,
    NotFound,
    ValidationError,
)
from mindstore.model.agents import (
    AgentState,
    agent_key,
    check_agent_name,
    check_alias,
    render_prompt,
)
from mindstore.model.messages import AnyMessage
from mindstore.operations import Resilience, operations, through
from mindstore.repositories.dialogs import DialogRepository
from mindstore.repositories.records import TaskRecord
from mindstore.services.tasks import TaskService

Change = Callable[[AgentState], AgentState]


@operations("agents", unsafe=("apply",))
class AgentRepository:
    """The agents of one tenant (and, in an owner-scoped view, only the owner's agent).

    `apply` runs a caller's change on the stored state: after a lost reply the change may
    have been applied, and applying it again to the new state is not the same, so its
    `Unavailable` reaches the caller, who reads the state before applying it again (the
    `RetryPolicy` does not retry it)."""

    def __init__(self, tasks: TaskService, dialogs: DialogRepository) -> None:
        self.tenant = tasks.tenant
        self.owner = tasks.owner
        self.tasks = tasks
        self.dialogs = dialogs
        self.retry = tasks.retry
        self._agents = tasks.database[AGENTS]
        self.lost_races = 0
        """Guarded writes that matched nothing and were planned again (for monitoring)."""

    @property
    def resilience(self) -> Resilience:
        """The tasks' retry policy and ledger (every method here is an operation)."""
        return self.tasks.resilience

    def _name(self, name: Any) -> str:
        checked = check_agent_name(name)
        if self.owner is not None and checked != self.owner:
            # an agent's dialogs are owned by it, so an owner-scoped view reaches only its own
            raise NotFound(f"no agent {checked!r} for owner {self.owner!r}")
        return checked

    def _filter(self, name: str) -> dict[str, Any]:
        return {"_id": agent_key(self.tenant, name), "tenant": self.tenant}

    async def state(self, name: str) -> AgentState:
        """The agent's stored state: its aliases, the active one, the version.

        Args:
            name: The agent's name.

        Returns:
            The `AgentState` (an empty, version-0 state for an agent never changed).

        Raises:
            ValidationError: `name` is not a name, or another owner's on an owner-scoped view.
        """
        name = self._name(name)
        document = await self._agents.find_one(self._filter(name))
        return AgentState.from_document(document) if document else AgentState(name=name)

    async def get(
        self,
        name: str,
        *,
        system_prompt: str | None = None,
        context_manager: ContextManager | None = None,
    ) -> Agent:
        """A handle on the agent `name` with its stored aliases (creates nothing until the first
        change).

        Args:
            name: The agent's name (it owns the agent's dialogs).
            system_prompt: A `str.format` template that seeds every dialog `Agent.open`
                creates.
            context_manager: Applied by `Agent.context()` to the messages before a model call.

        Returns:
            The `Agent`.

        Raises:
            ValidationError: `name` is not a name, or another owner's on an owner-scoped view.

        Example:
            ```python
            agent = await acme.agents.get("planner", system_prompt="You plan {city} trips.")
            await agent.open("main", {"city": "Lisbon"})
            await agent.receive("Three days, mid May")
            messages = await agent.context()
            ```
        """
        return Agent(
            self,
            await self.state(name),
            system_prompt=system_prompt,
            context_manager=context_manager,
        )

    async def list(self) -> list[str]:
        """The names of this tenant's agents that have stored aliases (the owner's, if scoped).

        Returns:
            The names, sorted.
        """
        query: dict[str, Any] = {"tenant": self.tenant}
        if self.owner is not None:
            query["owner"] = self.owner
        cursor = self._agents.find(query, {"owner": 1})
        return sorted([document["owner"] async for document in cursor])

    async def delete(self, name: str) -> bool:
        """Forget an agent's aliases; its dialogs stay (delete them with `dialogs.delete`).

        Args:
            name: The agent's name.

        Returns:
            True if there was a stored state to delete.

        Raises:
            ValidationError: `name` is not a name.
        """
        result = await self._agents.delete_one(self._filter(self._name(name)))
        return bool(result.deleted_count == 1)

    async def apply(self, name: str, change: Change) -> AgentState:
        """Apply a pure transition to the agent's state as one guarded write, re-planning after a
        lost race.

        Args:
            name: The agent's name.
            change: A function from the current `AgentState` to the new one (pure: it may run
                more than once).

        Returns:
            The stored new state.

        Raises:
            Conflict: `RetryPolicy.attempts` races lost, or the transition's own `Conflict`.
            NotFound: The transition's own (e.g. an unknown alias); not retried.
            ValidationError: `name` is not a name.
        """
        name = self._name(name)
        for attempt in range(self.retry.attempts):
            document = await self._agents.find_one(self._filter(name))
            current = AgentState.from_document(document) if document else AgentState(name=name)
            planned = change(current)
            if planned.changed_fields() == current.changed_fields():
                return current
            now = utcnow()
            if document is None:
                new = planned.model_copy(
                    update={"version": 1, "created_at": now, "updated_at": now}
                )
                try:
                    await self._agents.insert_one(new.to_document(self.tenant))
                    return new
                except DuplicateKeyError:
                    pass  # created meanwhile: plan again on what is stored
            else:
                new = planned.model_copy(update={"version": current.version + 1, "updated_at": now})
                result = await self._agents.update_one(
                    {**self._filter(name), "version": current.version},
                    {"$set": {**new.changed_fields(), "version": new.version, "updated_at": now}},
                )
                if result.matched_count == 1:
                    return new
            self.lost_races += 1
            await asyncio.sleep(self.retry.delay(attempt))
        raise Conflict(
            f"agent {name!r}: too many concurrent changes, "
            f"gave up after {self.retry.attempts} attempts"
        )


@operations("agent", resilience=through("repository"))
class Agent:
    """An agent's dialogs by alias (the dialog document's agent-level access).

    `dialogs`, `active_alias` and `current_dialog` are the state as of this handle's last
    read or write (`refresh()` reads again); every change re-reads what it changes, so a
    stale handle never overwrites another writer's change.
    """

    def __init__(
        self,
        repository: AgentRepository,
        state: AgentState,
        *,
        system_prompt: str | None = None,
        context_manager: ContextManager | None = None,
    ) -> None:
        self.repository = repository
        self.state = state
        self.system_prompt = system_prompt
        self.context_manager = context_manager

    # -- the document's names ---------------------------------------------------------
    @property
    def name(self) -> str:
        """The agent's name (the owner of its dialogs)."""
        return self.state.name

    @property
    def dialogs(self) -> dict[str, str]:
        """The agent's dialogs: alias -> dialog id."""
        return self.state.dialogs

    @property
    def active_alias(self) -> str | None:
        """The alias of the active dialog, or None before the first `open`."""
        return self.state.active_alias

    @property
    def current_dialog(self) -> str | None:
        """The active dialog's id; read and write it with `acme.dialogs` / `acme.tasks`."""
        return self.state.current_dialog

    async def refresh(self) -> Agent:
        """Read the agent's state again (another writer may have changed it).

        Returns:
            This handle, refreshed.
        """
        self.state = await self.repository.state(self.name)
        return self

    def _require_current(self) -> str:
        if self.current_dialog is None:
            raise InvalidTransition(f"agent {self.name!r} has no active dialog: open one first")
        return self.current_dialog

    # -- changes ----------------------------------------------------------------------
    async def _claim(self, alias: str, dialog: TaskRecord, **options: Any) -> TaskRecord:
        """Point `alias` at a dialog just stored; delete that dialog if the claim fails."""
        try:
            self.state = await self.repository.apply(
                self.name, lambda state: state.with_dialog(alias, dialog.id, **options)
            )
        except MindstoreError:
            # a failed clean-up is dropped: the claim's error is the one to report
            with contextlib.suppress(MindstoreError):
                await self.repository.dialogs.delete(dialog.id)
            raise
        return dialog

    async def open(
        self,
        alias: str,
        prompt_args: Mapping[str, Any] | None = None,
        *,
        system_prompt: str | None = None,
        title: str | None = None,
        switch: bool = True,
        replace: bool = False,
    ) -> TaskRecord:
        """A new dialog under `alias`, seeded with the agent's system prompt, made active.

        The prompt is `system_prompt` (else the agent's) rendered with `prompt_args`.

        Args:
            alias: The agent's name for the dialog (e.g. `"main"`).
            prompt_args: The system prompt's `str.format` arguments.
            system_prompt: A template for this dialog instead of the agent's.
            title: The dialog's title.
            switch: Make the new dialog the active one.
            replace: Point an alias already in use at the new dialog (the old dialog stays
                stored).

        Returns:
            The new dialog's task record.

        Raises:
            Conflict: `alias` is already open and `replace` is False.
            ValidationError: A bad alias, or `prompt_args` without a prompt to render.
        """
        check_alias(alias)
        template = system_prompt if system_prompt is not None else self.system_prompt
        if template is None and prompt_args:
            raise ValidationError(
                f"prompt_args: agent {self.name!r} has no system prompt to render"
            )
        prompt = render_prompt(template, prompt_args) if template is not None else None
        self.state = await self.repository.state(self.name)
        self.state.check_free(alias, replace=replace)  # fail before storing anything
        dialog = await self.repository.dialogs.create(self.name, prompt, title=title)
        return await self._claim(alias, dialog, activate=switch, replace=replace)

    async def switch(self, alias: str) -> None:
        """Make `alias` the active dialog.

        Args:
            alias: One of the agent's aliases.

        Raises:
            NotFound: The agent has no such alias.
            ValidationError: `alias` is not an alias.
        """
        check_alias(alias)
        self.state = await self.repository.apply(self.name, lambda state: state.switched(alias))

    async def fork(
        self,
        alias: str,
        new_alias: str,
        last_n: int = 0,
        first_k: int = 1,
        *,
        switch: bool = False,
        replace: bool = False,
    ) -> TaskRecord:
        """Fork the dialog under `alias` into a new one under `new_alias` (`dialogs.fork`:
        `last_n=0` copies everything, else the first `first_k` and the last `last_n`).

        Args:
            alias: The dialog to fork.
            new_alias: The alias of the fork.
            last_n: Keep the last `last_n` messages (0: everything).
            first_k: With `last_n`, also keep the first `first_k`.
            switch: Make the fork the active dialog.
            replace: Point `new_alias` at the fork even if it is in use.

        Returns:
            The fork's task record.

        Raises:
            NotFound: The agent has no alias `alias`.
            Conflict: `new_alias` is in use and `replace` is False.
            ValidationError: A bad alias or count.
        """
        check_alias(new_alias)
        self.state = await self.repository.state(self.name)
        source = self.state.dialog_id(alias)
        self.state.check_free(new_alias, replace=replace)
        child = await self.repository.dialogs.fork(
            source, last_n=last_n, first_k=first_k, owner=self.name
        )
        return await self._claim(
            new_alias, child, activate=switch, replace=replace, forked_from=alias
        )

    # -- working with the active dialog -------------------------------------------------
    async def receive(self, text: str, name: str = "user") -> AnyMessage:
        """Append a user message to the active dialog.

        Args:
            text: The text.
            name: The sender's name, kept on the message.

        Returns:
            The stored message.

        Raises:
            InvalidTransition: The agent has no active dialog (open one first).
            ValidationError: A bad text or name.
        """
        return await self.repository.dialogs.put_text(self._require_current(), text, name=name)

    async def context(self) -> list[AnyMessage]:
        """The active dialog's messages as they should go to the model: the stored view
        (compression checkpoints applied, nothing compressed here), then the agent's context
        manager, if it has one. The stored dialog is never changed.

        Returns:
            The messages.

        Raises:
            InvalidTransition: The agent has no active dialog.
        """
        window = await self.repository.tasks.context(self._require_current(), auto_compress=False)
        messages = window.messages
        return self.context_manager(messages) if self.context_manager is not None else messages
