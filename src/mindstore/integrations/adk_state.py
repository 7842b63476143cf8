"""The ADK state a session does not own: `app:` state (an app's users share it) and `user:`
state (a user's sessions share it), each kept in a task of its own, a *register*.

A register's messages are snapshots: the `n`-th holds the whole scope state after its
`n`-th change, with the id `slot_id(register, n)` and the event that made it (`source`).
Reading the state is `tail(1)`; a change appends the next snapshot under the next slot's
id, so two writers of one slot meet at the store's exactly-once guard: one is stored, the
other sees a replay that is not its own, reads the new snapshot and tries again (no change
is lost, none applied twice by one writer). Old snapshots move to sealed pages like any long
history (docs/data-model.md, "Paged messages"); being tasks, registers are backed up,
erased (the user's with its owner, the app's with the tenant) and listed like any task.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from mindstore.errors import Conflict, NotFound
from mindstore.integrations.adk_events import (
    MARKER,
    Scope,
    adk_metadata,
    entry_of,
    register_task_id,
    slot_id,
)
from mindstore.model.base import JSON
from mindstore.model.messages import AnyMessage, InformationalMessage
from mindstore.services.tasks import TaskService

ATTEMPTS = 64
"""Writers racing for one register's next slot: how many times one tries before `Conflict`."""


def _snapshot(register: str, slot: int, state: JSON, source: str) -> InformationalMessage:
    entry = {"register": True, "slot": slot, "state": state, "source": source}
    return InformationalMessage(id=slot_id(register, slot), metadata=adk_metadata(entry))


class StateRegister:
    """One scope's state (an app's or one user's) in its task (see the module doc)."""

    def __init__(
        self,
        tasks: TaskService,
        scope: Scope,
        app_name: str,
        user_id: str | None,
        owner: str | None,
    ) -> None:
        self._tasks = tasks
        self.scope = scope
        self.task_id = register_task_id(scope, app_name, user_id)
        self._owner = owner
        self._metadata: JSON = {**MARKER, "register": scope, "app_name": app_name}
        if user_id is not None:
            self._metadata["user_id"] = user_id

    async def read(self) -> tuple[int, JSON]:
        """The next slot and the current state ({} before the first change)."""
        try:
            last = await self._tasks.tail(self.task_id, 1)
        except NotFound:
            return 0, {}
        return _slot_and_state(last)

    async def apply(self, delta: Mapping[str, Any], source: str) -> JSON:
        """Merge `delta` into the state (one snapshot appended); the state after it."""
        for attempt in range(ATTEMPTS):
            slot, state = await self.read()
            new = {**state, **delta}
            snapshot = _snapshot(self.task_id, slot, new, source)
            try:
                if slot == 0:
                    await self._tasks.create(
                        task_id=self.task_id, owner=self._owner, title=None,
                        metadata=self._metadata, messages=[snapshot],
                    )  # fmt: skip
                    return new
                stored = await self._tasks.add_messages(self.task_id, [snapshot])
            except Conflict:  # another writer created it first
                await asyncio.sleep(0)
                continue
            except NotFound:  # deleted meanwhile: start afresh
                continue
            if entry_of(stored[0]).get("source") == source:
                return new
            await asyncio.sleep(0.001 * min(attempt, 10))  # lost the slot: read again
        raise Conflict(f"{self.scope} state of {self.task_id}: writers kept racing")


def _slot_and_state(last: list[AnyMessage]) -> tuple[int, JSON]:
    if not last:
        return 0, {}
    entry = entry_of(last[-1])
    state = entry.get("state")
    return int(entry.get("slot", -1)) + 1, dict(state) if isinstance(state, dict) else {}
