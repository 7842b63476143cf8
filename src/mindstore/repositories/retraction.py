"""Retracting the last message: the verb the OpenAI Agents session's `pop_item` needs.

The writer's loop (`engine.TaskWriter`) only sends `$set` updates, which cannot shorten the
message array, so this verb has its own short guarded loop over the port (per-task lock,
scope, header cache, retry policy, decoding, sealed pages); the planning is pure
(`model/retract.py`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from mindstore.clock import utcnow
from mindstore.draws import Tape, current_tape
from mindstore.errors import Conflict
from mindstore.header_codec import header_from_document
from mindstore.ids import check_name
from mindstore.model.messages import AnyMessage
from mindstore.model.storage_form import bson_size
from mindstore.repositories.pages import PAGING_FIELDS, Paging
from mindstore.repositories.port import TaskPort
from mindstore.repositories.scope import READ_FIELDS
from mindstore.search.index import forget_message


class Retraction:
    """`retract_last` over the port (`TaskRepository.retract_last` documents it)."""

    def __init__(self, port: TaskPort) -> None:
        self.port = port
        self.scope = port.scope

    # ------------------------------------------------------------------ retract
    async def retract_last(self, task_id: str, expected_id: str | None = None) -> AnyMessage | None:
        """Remove the task's last message in one guarded write and return it."""
        from mindstore.errors import InvalidTransition
        from mindstore.model import retract
        from mindstore.repositories.updates import changed_header_fields

        key = self.scope.key(task_id)
        if expected_id is not None:
            check_name(expected_id, "expected_id")
        if self.scope.cipher is not None:
            await self.scope.cipher.ready()
        projection: dict[str, Any] = dict.fromkeys(READ_FIELDS, 1)
        projection["messages"] = {"$slice": [-2, 2]}
        tape, noted = current_tape(), ("retract", key)
        async with self.scope.lock(task_id):
            earlier = tape.recall(noted) if tape is not None else None
            if isinstance(earlier, _Retracted):  # this call's earlier attempt, reply lost
                landed = await self._landed(task_id, earlier)
                if landed is None:
                    raise Conflict(
                        f"task {task_id!r}: another writer changed the task since an earlier "
                        "attempt of this retract_last, whose reply was lost: whether it was "
                        "applied cannot be told; read the task before calling again"
                    )
                if landed:  # done: what is left is its payloads' delete (idempotent)
                    _note(tape, noted, earlier)
                    return await self._removed(task_id, earlier.stored)
            for attempt in range(self.scope.retry.attempts):
                self.scope.forget(task_id)
                document = await self.scope.find_task(task_id, projection)
                header = header_from_document(document)
                stored = document.get("messages") or []
                if header.seq == 0:
                    return None
                if len(stored) < 2 and header.sealed:
                    if not stored:  # every message is sealed: bring the last page back first
                        await self.port.sealed.unseal_last(task_id)
                        continue
                    paging = Paging.of(document, strict=False)  # the update is pinned
                    stored = [*await self.port.sealed.messages(key, paging, header.sealed - 1,
                                                        header.sealed), *stored]  # fmt: skip
                last = self.port.decode_stored([stored[-1]], task_id)[0]
                if expected_id is not None and last.id != expected_id:
                    if await self.port.count_stored_ids(task_id, {expected_id}) == 0:
                        return None  # retracted already: a replay
                    raise InvalidTransition(
                        f"message {expected_id!r} is not the last message of task {task_id!r}"
                    )
                retract.check_retractable(header, last)
                calls = retract.answered_calls(last)
                reopen = (
                    retract.reopened_calls(
                        calls, await self._call_rows(task_id, calls), header.seq - 1
                    )
                    if calls
                    else []
                )
                previous = (
                    self.port.decode_stored([stored[-2]], task_id)[0] if len(stored) == 2 else None
                )
                plan = retract.plan_retract(header, last, bson_size(stored[-1]), previous, reopen)
                now = utcnow()
                version = document.get("version", 0)
                query, update = retract.retract_update(
                    plan, key=key, tenant=self.scope.tenant, version=version, now=now,
                    changed=changed_header_fields(plan.header_before, plan.header),
                    sealed=header.sealed,
                )  # fmt: skip
                if self.scope.owner is not None:
                    query["owner"] = self.scope.owner
                sent = _Retracted(version, now, stored[-1])
                try:
                    result = await self.scope.tasks.update_one(query, update)
                except BaseException:
                    _note(tape, noted, sent)  # its outcome is unknown: a retry asks
                    raise
                if result.matched_count == 1:
                    _note(tape, noted, sent)
                    self.scope.remember(task_id, version + 1, now, plan.header)
                    self.scope.notifier.notify((self.scope.tenant, task_id))
                    return await self._removed(task_id, stored[-1])
                await asyncio.sleep(self.scope.retry.delay(attempt))
        raise Conflict(
            f"task {task_id!r}: retract_last gave up after {self.scope.retry.attempts} attempts "
            "lost to concurrent writers"
        )

    async def _removed(self, task_id: str, stored: dict[str, Any]) -> AnyMessage:
        """The retracted message, decoded, once its offloaded payloads are deleted."""
        from mindstore.payloads import find_markers

        message = (await self.port.decode(task_id, [stored]))[0]
        markers: set[str] = set()
        find_markers(stored, markers)
        if markers:
            await self.scope.payloads.delete_many(
                {"_id": {"$in": sorted(markers)}, "tenant": self.scope.tenant}
            )
        # the search index forgets it now, not at the next search (mindstore.search)
        await forget_message(self.scope.database, self.scope.tenant, task_id, message.id)
        return message

    async def _landed(self, task_id: str, sent: _Retracted) -> bool | None:
        """Did the retract an earlier attempt sent land (the question a verb's retry asks:
        `engine.TaskWriter`)?"""
        document = await self.scope.tasks.find_one(
            self.scope.filter(task_id), {"version": 1, "updated_at": 1}
        )
        if document is None or int(document.get("version", 0)) == sent.version:
            return False
        if (int(document.get("version", 0)), document.get("updated_at")) == (
            sent.version + 1, sent.stamp,
        ):  # fmt: skip
            return True
        return None

    async def _call_rows(self, task_id: str, call_ids: Sequence[str]) -> list[dict[str, Any]]:
        """Every stored message holding a call or a result with one of `call_ids` (and its
        index in the history), sealed pages first."""
        pipeline = [
            {"$match": self.scope.filter(task_id)},
            {"$unwind": {"path": "$messages", "includeArrayIndex": "index"}},
            {"$match": {"messages.content.tool_call_id": {"$in": list(call_ids)}}},
            {"$project": {"_id": 0, "index": 1, "message": "$messages", "sealed": 1}},
        ]
        rows = await (await self.scope.tasks.aggregate(pipeline)).to_list(length=None)
        located = [(int(row.get("sealed", 0) or 0) + int(row["index"]), row["message"])
                   for row in rows]  # fmt: skip
        paging = Paging.of(
            await self.scope.find_task(task_id, dict.fromkeys(PAGING_FIELDS, 1)), strict=False
        )
        sealed = await self.port.sealed.locate(
            self.scope.key(task_id), paging, "content.tool_call_id", list(call_ids)
        )
        return [
            {"index": index, "message": self.port.decode_stored([message], task_id)[0]}
            for index, message in [*sealed, *located]
        ]


@dataclass(frozen=True)
class _Retracted:
    """What a retract sent (the version it was pinned to, the time it set) and the message
    it removes, noted so its retry can tell whether it landed (`mindstore.draws`)."""

    version: int
    stamp: datetime
    stored: dict[str, Any]


def _note(tape: Tape | None, key: tuple[str, str], sent: _Retracted) -> None:
    if tape is not None:
        tape.note(key, sent)
