"""The ADK state a session does not own: `app:` state (an app's users share it) and `user:`
state (a user's sessions share it), each kept in a task of its own, a *register*.

A register is a log of two kinds of messages, each under the next slot's id
(`slot_id(register, n)`):

* an **intent**: "the event stored in session task T at slot s, with commit mark c, carries
  this delta for this scope", recorded *before* the event is written;
* a **snapshot**: the whole scope state, covering every register slot before its own, with
  the intents it could not yet decide carried forward (`pending`).

The event's write is the commit point of its whole state delta: its message carries the
commit mark (`adk_events`, entry ``commit``). The state a reader sees is the last snapshot
with every intent after it (and every pending one) *rolled forward*: an intent whose event
is stored with its mark is applied; one whose slot holds another event (the writer lost a
stale-session race) or whose session is gone is dropped; one whose slot is still empty is
left pending (the event is not committed, so it is not seen) until `grace` seconds have
passed since it was recorded, then dropped (its writer is taken as dead). Whoever reads
(`get_session`, `list_sessions`, `get_user_state`, the writer itself after its event) and
finds something decided appends the next snapshot; writers racing for a slot meet at the
store's exactly-once guard, the loser reads again, so a delta is applied once, in the order
its intents were recorded. No multi-document transaction is needed: a process dying between
the event and the snapshot leaves a committed intent that the next reader applies.

Old messages move to sealed pages like any long history (docs/data-model.md, "Paged
messages"); being tasks, registers are backed up, erased (the user's with its owner, the
app's with the tenant) and listed like any task.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

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
GRACE = 60.0
"""Seconds an intent whose event is not stored stays pending before it is dropped."""
FIRST_TAIL = 4
Verdict = Literal["apply", "drop", "wait"]


@dataclass(frozen=True)
class Intent:
    """Where the event carrying a delta is committed: session task, slot, commit mark."""

    task_id: str
    slot: int
    commit: str

    @staticmethod
    def new(task_id: str, slot: int) -> Intent:
        return Intent(task_id, slot, uuid.uuid4().hex)


def _message(register: str, slot: int, entry: JSON) -> InformationalMessage:
    entry = {"register": True, "slot": slot, "mark": uuid.uuid4().hex, **entry}
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
        *,
        grace: float = GRACE,
    ) -> None:
        self._tasks = tasks
        self.scope = scope
        self.task_id = register_task_id(scope, app_name, user_id)
        self._owner = owner
        self._grace = grace
        self._metadata: JSON = {**MARKER, "register": scope, "app_name": app_name}
        if user_id is not None:
            self._metadata["user_id"] = user_id

    async def intend(self, delta: Mapping[str, Any], intent: Intent) -> None:
        """Record that the event at `intent` carries `delta` (before the event's write)."""
        entry: JSON = {"intent": {"task_id": intent.task_id, "slot": intent.slot,
                                  "commit": intent.commit, "at": time.time()},
                       "delta": dict(delta)}  # fmt: skip
        for attempt in range(ATTEMPTS):
            slot, _, _ = await self._log()
            if await self._put(slot, entry):
                return
            await asyncio.sleep(0.001 * min(attempt, 10))
        raise Conflict(f"{self.scope} state of {self.task_id}: writers kept racing")

    async def read(self) -> tuple[int, JSON]:
        """The next slot and the current state, committed intents rolled forward ({} before
        the first change)."""
        for attempt in range(ATTEMPTS):
            slot, state, pending = await self._log()
            if not pending:
                return slot, state
            changed = False
            kept: list[JSON] = []
            for entry in pending:
                verdict = await self._decide(entry["intent"])
                if verdict == "apply":
                    state = {**state, **entry["delta"]}
                if verdict == "wait":
                    kept.append(entry)
                else:
                    changed = True
            if not changed:
                return slot, state
            if await self._put(slot, {"state": state, "pending": kept}):
                return slot + 1, state
            await asyncio.sleep(0.001 * min(attempt, 10))
        raise Conflict(f"{self.scope} state of {self.task_id}: writers kept racing")

    async def _decide(self, intent: JSON) -> Verdict:
        """What to do with an intent: apply it (its event is stored), drop it (it never
        will be) or wait (not stored yet, within the grace)."""
        task_id, slot = str(intent["task_id"]), int(intent["slot"])
        try:
            stored = await self._tasks.get_message(task_id, slot_id(task_id, slot))
        except NotFound:
            return "drop"  # the session is gone
        if stored is not None:
            return "apply" if entry_of(stored).get("commit") == intent["commit"] else "drop"
        if time.time() - float(intent["at"]) > self._grace:
            return "drop"
        return "wait"

    async def _log(self) -> tuple[int, JSON, list[JSON]]:
        """The next slot, the last snapshot's state, and the intents not covered by it
        (its pending ones, then those after it, in slot order)."""
        size = FIRST_TAIL
        while True:
            try:
                last = await self._tasks.tail(self.task_id, size)
            except NotFound:
                return 0, {}, []
            entries = [entry_of(m) for m in last]
            for index in range(len(entries) - 1, -1, -1):
                if "state" in entries[index]:
                    base = entries[index]
                    after = [e for e in entries[index + 1 :] if "intent" in e]
                    return (_next(last), dict(base["state"]),
                            [*base.get("pending", []), *after])  # fmt: skip
            if len(last) < size:
                return _next(last), {}, [e for e in entries if "intent" in e]
            size *= 2

    async def _put(self, slot: int, entry: JSON) -> bool:
        """Write `entry` at `slot`; False when another writer holds the slot."""
        message = _message(self.task_id, slot, entry)
        try:
            if slot == 0:
                await self._tasks.create(
                    task_id=self.task_id, owner=self._owner, title=None,
                    metadata=self._metadata, messages=[message],
                )  # fmt: skip
                return True
            stored = await self._tasks.add_messages(self.task_id, [message])
        except (Conflict, NotFound):  # created meanwhile, or deleted: read again
            return False
        return bool(entry_of(stored[0]).get("mark") == entry_of(message)["mark"])


def _next(last: list[AnyMessage]) -> int:
    if not last:
        return 0
    return int(entry_of(last[-1]).get("slot", -1)) + 1
