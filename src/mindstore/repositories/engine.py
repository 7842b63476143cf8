"""The task repository's mutation engine: plan, guard, retry, replay, header cache.

A verb takes the state it plans from (the header, the last message, the message it
changes) from the header cache when this process wrote the task last, else from one read
(`scope.TaskScope`), asks the pure planner what to write, and applies the plan with one
`update_one` whose filter pins that state (`version` and `updated_at`). A lost race
matches nothing: the verb re-reads and re-plans (bounded, jittered) and finally raises
`Conflict`. Multi-message verbs (task entry, task exit with its tool answer) are a single
update, so a reader never sees half of one.

Within one process, writers to the same task queue on a per-task lock first, so the
optimistic retry loop only pays for races with *other* processes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pymongo.errors import PyMongoError

from mindstore import operations
from mindstore.clock import utcnow
from mindstore.draws import Tape, current_tape
from mindstore.errors import (
    Conflict,
    MindstoreError,
    NotFound,
    TaskTooLarge,
    Unavailable,
    ValidationError,
)
from mindstore.header_codec import header_from_document
from mindstore.ids import check_name
from mindstore.model import id_filter
from mindstore.model.header import TaskHeader
from mindstore.model.messages import AnyMessage, UnknownMessage, parse_messages
from mindstore.model.paging import DEFAULT_POLICY, should_seal
from mindstore.model.plans import Plan
from mindstore.model.stored_read import chunk_overhead
from mindstore.operations import RetryPolicy
from mindstore.payloads import RESERVED_PREFIX, Offloader, read_value
from mindstore.repositories.header_cache import apply_sets
from mindstore.repositories.pages import Paging
from mindstore.repositories.port import MAX_SLICE, TaskPort
from mindstore.repositories.scope import (
    MAX_DOCUMENT_BYTES,
    PLAN_FIELDS,
    READ_FIELDS,
)
from mindstore.repositories.updates import build_task_update

logger = logging.getLogger(__name__)

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "MAX_SLICE",
    "PLAN_FIELDS",
    "READ_FIELDS",
    "RetryPolicy",
    "TaskWriter",
    "document_estimate",
]

# Room kept for the header fields and the array's index keys, which `size_bytes` excludes:
# title (<= 4,096 characters), metadata (<= 64 KiB), the scope stack and open calls.
HEADER_BUDGET_BYTES = 192 * 1024

PlanFn = Callable[[TaskHeader, "dict[str, Any] | None", Offloader], Plan]
"""(header, located message or None, offloader) -> Plan."""


@dataclass(frozen=True)
class _State:
    """What a verb plans from: the task state at `version` (and `updated_at`, which the
    write pins with it), the stored last message, and the message a part verb changes."""

    version: int
    updated_at: datetime | None
    header: TaskHeader
    tail: dict[str, Any] | None
    located: tuple[int, dict[str, Any]] | None = None
    cached: bool = False
    unset: tuple[str, ...] = ()
    pending: bool = False
    """The task holds changes to sealed messages not yet folded into their pages."""


@dataclass(frozen=True)
class _Sent:
    """What a guarded update sent, noted on the operation's tape (`mindstore.draws`) so a
    retry of the call can tell whether it landed: the version it was pinned to, the
    `updated_at` it set, the ids of the messages it appended, what the verb returned."""

    version: int
    stamp: datetime
    new_ids: tuple[str, ...]
    result: Any


@dataclass(frozen=True)
class _Sealed:
    """A seal this operation made after one of its writes (its own `$inc` of the version
    and stamp), noted so a retry does not take it for another writer's change."""

    version: int
    stamp: datetime


UNNAMED = (
    "this call named no message id: retried from this process it is exactly-once (the "
    "store keeps what the call drew), retried from another one it may be applied twice; "
    "pass message_id to make every retry exactly-once"
)
"""What `Unavailable` says of a verb whose retry only this process can make exactly-once."""


def document_estimate(header: TaskHeader) -> int:
    """Upper estimate of the task document's size: the open page's messages, their array
    keys, the header and the sealed-id filter (sealed messages live in their pages)."""
    filter_bytes = header.id_filter_words * 16  # an int64 array element: 8 bytes and its key
    return header.open_bytes + header.open_count * 8 + HEADER_BUDGET_BYTES + filter_bytes


def _already_stored(task_id: str, taken: Iterable[str]) -> ValidationError:
    """A write names message ids the task holds, but is not a replay of one call."""
    return ValidationError(f"message ids already stored in task {task_id!r}: {sorted(taken)}")


def _drop_chunk_overhead(plan: Plan, index: int, raw: dict[str, Any]) -> None:
    """A plan that sets a message's whole `content` (redaction) sized the old content from
    its decoded form, where streamed chunks are joined: take off the bytes the chunks'
    framing held too, so `size_bytes` stays the stored form's (model/streaming.py)."""
    if any(patch.index == index and patch.path == "content" for patch in plan.patches):
        overhead = chunk_overhead(raw)
        plan.header.size_bytes -= overhead
        if index < plan.header.sealed:
            plan.header.sealed_bytes -= overhead


def _has_reserved(value: Any) -> bool:
    """True if a stored value holds a marker or an escaped string (rare: then decode it)."""
    if isinstance(value, str):
        return value.startswith(RESERVED_PREFIX)
    if isinstance(value, dict):
        return any(_has_reserved(item) for item in value.values())
    if isinstance(value, list):
        return any(_has_reserved(item) for item in value)
    return False


def caller_form(message: AnyMessage) -> AnyMessage:
    """A planned message (stored form) as the caller wrote it, escapes removed; a marker
    stays a marker (resolving it would cost a read for a value the caller has)."""
    document = message.to_dict()
    if not _has_reserved(document):
        return message
    return (
        parse_messages([read_value(document, {})])[0]
        if not isinstance(message, UnknownMessage)
        else message
    )


class TaskWriter:
    """Runs a plan as one guarded update of a task: the write loop, replays, the header
    cache, and the housekeeping a committed write leaves (fold, seal). Reads and I/O go
    through the `TaskPort`; one writer per view."""

    def __init__(self, port: TaskPort) -> None:
        self.port = port
        self.scope = port.scope

    # ------------------------------------------------------------------ replays

    async def _replayed(
        self, task_id: str, ids: Sequence[str], planned: Sequence[AnyMessage] | None = None
    ) -> dict[str, AnyMessage] | None:
        """If every given id is already stored, this call is a replay: return the stored ones.

        `planned`: the messages of a write that lost a race. Then only the open page is
        asked (one count): a replayed message that is sealed is found by the next attempt,
        which checks the pages before its update when the sealed-id filter may have
        refused the write (`model/id_filter.py`). Without `planned` (planning failed) the
        pages are asked too.
        """
        ids = [i for i in ids if i]
        if not ids:
            return None
        query = {**self.scope.filter(task_id), "messages.id": {"$in": ids}}
        found = await self.scope.tasks.count_documents(query, limit=1)
        if not found and planned is not None:
            return None  # the usual case after a lost race: nothing of ours is stored
        stored = await self.port.stored_messages_by_id(task_id, ids) if found else {}
        if len(stored) < len(ids):
            _count, paging = await self.port.open_ids(task_id, set(ids))
            sealed = await self.port.sealed.locate(self.scope.key(task_id), paging, "id", ids)
            decoded = await self.port.decode(task_id, [message for _, message in sealed])
            stored.update({message.id: message for message in decoded})
        if not stored:
            return None
        if not all(i in stored for i in ids):
            raise _already_stored(task_id, (i for i in ids if i in stored))
        return stored

    async def _landed(self, task_id: str, sent: _Sent, later: list[object]) -> bool | None:
        """Did the update an earlier attempt of this call sent (`sent`) land? False when
        the task is still at the version it was pinned to (or is gone), True when it is
        where that update or a later one of the same call left it, or when the messages it
        appended are stored; None when another writer moved the task and nothing tells."""
        document = await self.scope.tasks.find_one(
            self.scope.filter(task_id), {"version": 1, "updated_at": 1}
        )
        if document is None or int(document.get("version", 0)) == sent.version:
            return False
        version, stamp = int(document.get("version", 0)), document.get("updated_at")
        if any(
            (isinstance(s, _Sent) and (version, stamp) == (s.version + 1, s.stamp))
            or (isinstance(s, _Sealed) and (version, stamp) == (s.version, s.stamp))
            for s in later
        ):
            return True
        if sent.new_ids:
            return await self._replayed(task_id, list(sent.new_ids)) is not None
        return None

    async def _filter_passes(self, task_id: str, words: int, ids: Sequence[str]) -> bool:
        """After a write that matched nothing: does the task's sealed-id filter let `ids`
        through (the write lost a race), or does it say one may be sealed (look in the
        pages)? One count, no document travels."""
        query: dict[str, Any] = self.scope.filter(task_id)
        query["$and"] = id_filter.guard(words, sorted(set(ids)))
        return bool(await self.scope.tasks.count_documents(query, limit=1))

    async def _check_required(self, task_id: str, ids: Sequence[str]) -> None:
        """After a write that matched nothing: was a message it requires missing?"""
        wanted = set(ids)
        if wanted and await self.port.count_stored_ids(task_id, wanted) < len(wanted):
            raise ValidationError(
                "compressed_message_ids / kept_message_ids name messages "
                "that the task does not hold"
            )

    async def after_write(
        self, task_id: str, version: int, header: TaskHeader, tail: dict[str, Any] | None,
        *, fold: bool,
    ) -> None:  # fmt: skip
        """Housekeeping a committed write may leave: fold changes to sealed messages into
        their pages, seal the open page once it has grown to twice a page. Both are
        repairs any later write redoes, so a failure here does not fail the verb."""
        try:
            if fold and not await self.port.sealed.fold(task_id):
                # changes still pending (a page or the clear lost to another writer): the
                # next write reads the state, sees them and folds again (a cached state
                # does not know of them)
                self.scope.forget(task_id)
            if should_seal(header, self.scope.page_policy):
                sealed = await self.port.sealed.seal(task_id, version, header)
                if sealed is not None:
                    after, now = sealed
                    self.scope.remember(task_id, version + 1, now, after, tail)
                    _note(current_tape(), ("task", self.scope.key(task_id)),
                          _Sealed(version + 1, now))  # fmt: skip
        except (PyMongoError, Unavailable) as error:
            self.scope.forget(task_id)
            logger.warning("task %r: paging after a write failed (%s); the next write "
                           "repairs it", task_id, error)  # fmt: skip

    def _seal_may_run(self, header: TaskHeader) -> bool:
        """Could a seal of this task be under way (another process's, with its own page
        size)? When it is due by this store's page size, or by the default one."""
        policy = self.scope.page_policy
        return bool(should_seal(header, policy) or should_seal(header, DEFAULT_POLICY))

    async def _changed_since(self, task_id: str, version: int) -> bool:
        """Has the task moved past `version` (a forced seal that found it changed, or lost
        to another writer, did not fail for lack of room: the verb plans again)?"""
        document = await self.scope.tasks.find_one(self.scope.filter(task_id), {"version": 1})
        return document is not None and int(document.get("version", 0)) != version

    async def _seal_now(self, task_id: str, version: int, header: TaskHeader) -> bool:
        """Seal before a write that would not fit (the cache is dropped either way)."""
        self.scope.forget(task_id)
        return await self.port.sealed.seal(task_id, version, header, force=True) is not None

    # ------------------------------------------------------------------ the write loop
    def _cached_state(self, task_id: str, locate: str | None) -> _State | None:
        """The state this process last wrote, if it knows all the verb needs (for a verb
        on a message: that it is the last message, whose stored form the entry keeps)."""
        entry = self.scope.cached(task_id)
        if entry is None:
            return None
        located = None
        if locate is not None:
            known = entry.tail_document(locate)
            if known is None:
                return None
            located = (known[0], known[1])
        return _State(entry.version, entry.updated_at, entry.header, entry.tail, located, True)

    async def _read_state(self, task_id: str, locate: str | None) -> _State:
        """The state as stored: one read of the header and the last message (for a verb on
        an earlier message, one more read of that message)."""
        located = None
        if locate is None:
            document = await self.port.header_document(task_id, write=True)
        else:
            document, index, raw = await self.port.locate(task_id, locate)
            located = (index, raw)
        stored = document.get("messages") or []
        self.scope.require_keyring([document], "write to")
        return _State(
            version=document.get("version", 0),
            updated_at=document.get("updated_at"),
            header=header_from_document(document),
            tail=stored[-1] if stored else None,
            located=located,
            cached=False,
            unset=("tail",) if "tail" in document else (),
            pending=bool(document.get("pending")),
        )

    @staticmethod
    def _next_tail(
        plan: Plan, update: dict[str, dict[str, Any]], state: _State
    ) -> dict[str, Any] | None:
        """The stored form of the last message after this write, when it is known: the
        last appended document, or the previous one with this write's `$set` and `$unset`
        paths applied (a lean patch removes a field set back to its default; a streamed chunk
        is pushed)."""
        if plan.appended_docs:
            return plan.appended_docs[-1]
        tail, before = plan.header.tail, state.header.tail
        if state.tail is None or tail is None or before is None or before.index != tail.index:
            return None
        if tail.index < state.header.sealed:  # its changes went to `pending`: not tracked here
            return None
        prefix = f"messages.{tail.index - state.header.sealed}."

        def inside(entries: dict[str, Any]) -> dict[str, Any]:
            return {k[len(prefix) :]: v for k, v in entries.items() if k.startswith(prefix)}

        return apply_sets(
            state.tail, inside(update.get("$set", {})), inside(update.get("$unset", {})),
            inside(update.get("$push", {})),
        )  # fmt: skip

    async def mutate(
        self,
        task_id: str,
        plan_fn: PlanFn,
        *,
        locate: str | None = None,
        explicit_ids: Sequence[str | None] = (),
        on_replay: Callable[[dict[str, AnyMessage]], Any] | None = None,
        also_guard: Sequence[str | None] = (),
        require_ids: Sequence[str] = (),
    ) -> Any:
        """Plan from the header, apply one guarded update; retry lost races; detect replays.

        `explicit_ids`: the message ids the caller named, which make a repeated call a
        replay; `also_guard`: other caller-named ids the exactly-once guard must hold
        (an exit's answer id), without taking part in replay detection; `require_ids`:
        stored messages the write refers to (the filter requires them, and a write that
        matches nothing because one is missing raises `ValidationError`).

        The state planned from (header, and for a verb on a message that message) is the
        one this process last wrote (`HeaderCache`) when it has it, else a fresh read. A
        cached state is only a guess: if planning from it fails or the guarded update
        matches nothing, it is dropped and the verb goes on from a read.
        """
        key = self.scope.key(task_id)
        ids = [check_name(i, "message id") for i in explicit_ids if i is not None]
        guard = [*ids, *(check_name(i, "message id") for i in also_guard if i is not None)]
        running = operations.current()
        if running is not None and not ids:
            running.note = UNNAMED
        if self.scope.cipher is not None:
            await self.scope.cipher.ready(write=True)
        tape, noted = current_tape(), ("task", key)
        async with self.scope.lock(task_id):
            if tape is not None and tape.replaying:
                earlier = _recall_sent(tape, noted)
                if earlier is not None:
                    landed = await self._landed(task_id, earlier, tape.later(noted))
                    if landed:
                        tape.note(noted, earlier)  # carried on: a later retry walks it again
                        return earlier.result
                    if landed is None:
                        raise Conflict(
                            f"task {task_id!r}: another writer changed the task since an "
                            "earlier attempt of this call, whose reply was lost: whether it "
                            "was applied cannot be told; read the task before calling again"
                        )
            inserted: list[str] = []  # payloads this call inserted (none replaced)
            try:
                attempt = 0
                look_in_pages = False  # the filter refused the last write: the pages decide next
                while attempt < self.scope.retry.attempts:
                    state = self._cached_state(task_id, locate)
                    if state is None:
                        state = await self._read_state(task_id, locate)
                    located = None
                    if state.located is not None:
                        index, raw = state.located
                        if self.scope.cipher is not None:  # a newer key version is fetched (async)
                            raw = (await self.scope.cipher.opened([raw], task_id))[0]
                        message = self.port.parse_opened([raw], task_id)[0]
                        located = {"index": index, "message": message}
                    header = state.header
                    offloader = self.scope.offloader(task_id)
                    try:
                        plan = plan_fn(header, located, offloader)
                    except MindstoreError:
                        if state.cached:  # maybe stale: decide on what is stored
                            self.scope.forget(task_id)
                            continue
                        replay = await self._replayed(task_id, ids)
                        if replay is not None and on_replay is not None:
                            return on_replay(replay)
                        raise
                    if plan.is_empty:
                        return plan.result
                    if state.located is not None:
                        _drop_chunk_overhead(plan, *state.located)
                    if document_estimate(plan.header) > self.scope.max_document_bytes:
                        if state.cached:
                            self.scope.forget(task_id)
                            continue
                        if header.open_count > 1:
                            if await self._seal_now(task_id, state.version, header):
                                continue  # the open page moved to pages: plan again
                            if await self._changed_since(task_id, state.version):
                                await asyncio.sleep(self.scope.retry.delay(attempt))  # a lost race:
                                attempt += 1  # read again and plan again
                                continue
                        added = plan.header.size_bytes - header.size_bytes
                        limit = self.scope.max_document_bytes
                        raise TaskTooLarge(task_id, header.open_bytes, added, limit)
                    open_required, patched_ids, unsealed = list(require_ids), {}, list(guard)
                    if header.pages:
                        paging = Paging(state.version, header.sealed, header.pages, strict=False)
                        patched_ids = await self.port.sealed.ids_at(key, paging, plan)
                        if guard and (look_in_pages or not header.id_filter_words):
                            # the filter said "maybe" (or there is none yet): ask the pages,
                            # after reading the state this write is pinned to
                            found = await self.port.sealed.ids(key, paging, guard)
                            if found:
                                replay = await self._replayed(task_id, ids)
                                if replay is not None:
                                    if on_replay is not None:
                                        return on_replay(replay)
                                    return plan.result
                                raise _already_stored(task_id, found)
                            unsealed = []
                        required_sealed = await self.port.sealed.ids(key, paging, require_ids)
                        open_required = [i for i in require_ids if i not in required_sealed]
                    now = utcnow()
                    query, update = build_task_update(
                        plan, key=key, tenant=self.scope.tenant, version=state.version,
                        updated_at=state.updated_at, now=now, transform=offloader.transform_value,
                        guard_ids=guard, require_ids=open_required, unset=state.unset,
                        sealed_ids=patched_ids, seal_due=self._seal_may_run(header),
                        unsealed_ids=unsealed if header.pages else (),
                    )  # fmt: skip
                    if self.scope.owner is not None:
                        query["owner"] = self.scope.owner
                    inserted += await self.port.store_payloads(task_id, offloader)
                    sent = _Sent(state.version, now, tuple(plan.new_ids), plan.result)
                    try:
                        result = await self.scope.tasks.update_one(query, update)
                    except BaseException:
                        self.scope.forget(task_id)  # applied or not, the cached state: a guess
                        _note(tape, noted, sent)  # its outcome is unknown: a retry asks
                        raise
                    if result.matched_count == 1:
                        _note(tape, noted, sent)
                        tail = self._next_tail(plan, update, state)
                        self.scope.remember(task_id, state.version + 1, now, plan.header, tail)
                        self.scope.notifier.notify((self.scope.tenant, task_id))
                        await self.after_write(
                            task_id, state.version + 1, plan.header, tail,
                            fold=state.pending
                            or ("$push" in update and "pending" in update["$push"]),
                        )  # fmt: skip
                        return plan.result
                    self.scope.forget(task_id)
                    replay = await self._replayed(task_id, ids or plan.new_ids, plan.appended)
                    if replay is not None:
                        return on_replay(replay) if on_replay is not None else plan.result
                    await self._check_required(task_id, require_ids)
                    if (
                        header.pages
                        and unsealed
                        and not await self._filter_passes(task_id, header.id_filter_words, unsealed)
                    ):
                        look_in_pages = True  # the sealed-id filter refused it: the pages decide,
                        continue  # once, before the next write (no backoff: not a lost race)
                    look_in_pages = False
                    if not state.cached:  # a cache miss is not a lost race: no backoff for it
                        logger.debug("task %r: lost a race to another writer (attempt %d of %d)",
                                     task_id, attempt + 1, self.scope.retry.attempts)  # fmt: skip
                        await asyncio.sleep(self.scope.retry.delay(attempt))
                        attempt += 1
            except NotFound:  # no attempt applied: the task is not in this view (or gone)
                await self.port.drop_payloads(inserted)  # so nothing it wrote stays
                raise
        logger.debug("task %r: conflict, all %d attempts lost to concurrent writers",
                     task_id, self.scope.retry.attempts)  # fmt: skip
        raise Conflict(
            f"task {task_id!r}: gave up after {self.scope.retry.attempts} attempts "
            "lost to concurrent writers"
        )

    async def verb(
        self,
        task_id: str,
        planner_fn: Callable[..., Plan],
        *args: Any,
        ids: Sequence[str | None] = (),
        replay: Callable[[dict[str, AnyMessage]], Any] | None = None,
        also_guard: Sequence[str | None] = (),
        require_ids: Sequence[str] = (),
        **kwargs: Any,
    ) -> Any:
        """Run `planner_fn(header, task_id, *args, transform=..., **kwargs)` as one guarded
        write (`mutate`). `ids`: the caller-named message ids (a repeated call is a replay,
        answered by `replay(stored)`, by default the first id's stored message)."""

        def plan(header: TaskHeader, _located: Any, offloader: Offloader) -> Plan:
            return planner_fn(
                header, task_id, *args, transform=offloader.transform_document, **kwargs
            )

        if replay is None and ids:
            first = ids[0]
            replay = (lambda stored: stored.get(first)) if first else None
        return await self.mutate(
            task_id, plan, explicit_ids=ids, on_replay=replay, also_guard=also_guard,
            require_ids=require_ids,
        )  # fmt: skip

    async def part_verb(
        self,
        task_id: str,
        message_id: str,
        planner_fn: Callable[..., Plan],
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        """Run a verb on one stored message (a part added, a message finished):
        `planner_fn(header, task_id, index, message, *args, ...)` planned from that message
        as stored, one guarded write; returns the message as the caller wrote it."""
        check_name(message_id, "message id")

        def plan(header: TaskHeader, located: dict[str, Any] | None, offloader: Offloader) -> Plan:
            assert located is not None
            return planner_fn(
                header, task_id, located["index"], located["message"], *args,
                transform=offloader.transform_document, **kwargs,
            )  # fmt: skip

        result = await self.mutate(task_id, plan, locate=message_id)
        return caller_form(result)


def _note(tape: Tape | None, key: tuple[str, str], sent: _Sent | _Sealed) -> None:
    if tape is not None:
        tape.note(key, sent)


def _recall_sent(tape: Tape, key: tuple[str, str]) -> _Sent | None:
    """The earlier attempt's next write to this task; the seals noted before it are
    carried on to this attempt's tape, in order."""
    while True:
        earlier = tape.recall(key)
        if earlier is None or isinstance(earlier, _Sent):
            return earlier if isinstance(earlier, _Sent) else None
        tape.note(key, earlier)
