"""The stored header and the cached last message: compact, derived, and never trusted blindly.

* the stored form (`stored_header`) reads back as the header it was written from, and the
  updates `header_changes` sends turn one stored form into the next (checked by applying
  them as MongoDB does, for random verb sequences);
* documents written before (a stored `tail`, long usage keys, tool calls with their
  message id, frames written out in full) read as the same header, and a write drops the
  old `tail` field;
* two stores on one database writing the same task in turns (each with its own, soon
  stale, header cache and last message) end with exactly what the in-memory `Task` holds
  after the same verbs; a stale cache costs a read, never a wrong write.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import itertools
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import close_store, open_store
from layout import assert_paging, flat_task, split_housekeeping, unpaged
from mindstore.backup.shape import check_task
from mindstore.model.header import (
    ScopeFrame,
    TaskHeader,
    ToolCallRef,
    UsageTotals,
    header_from_stored,
    stored_header,
)
from mindstore.model.messages import AssistantMessage, message_to_dict
from mindstore.model.parts import TextPart, ToolCallPart
from mindstore.model.task import Task
from mindstore.repositories.header_cache import (
    MAX_TAIL_BYTES,
    CachedHeader,
    HeaderCache,
    apply_sets,
)
from mindstore.repositories.updates import header_changes
from mindstore.store import Store
from test_repository_property import CONFIG, OPS, apply

# ---------------------------------------------------------------- a MongoDB update, in Python


def _step_into(document: Any, step: str) -> Any:
    if isinstance(document, list):
        return document[int(step)]
    return document.setdefault(step, {})


def apply_update(document: dict[str, Any], update: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """`$set` (dotted, array index = append), `$push` (value or `$each`/`$slice`), `$unset`."""
    result = copy.deepcopy(document)
    for operator, entries in update.items():
        for path, value in entries.items():
            *steps, last = path.split(".")
            target: Any = result
            for step in steps:
                target = _step_into(target, step)
            if operator == "$set" and isinstance(target, list):
                index = int(last)
                assert index <= len(target), path
                target[index:index + 1] = [copy.deepcopy(value)]  # fmt: skip
            elif operator == "$set":
                target[last] = copy.deepcopy(value)
            elif operator == "$unset":
                target.pop(last, None)
            else:
                assert operator == "$push", operator
                array = target.setdefault(last, [])
                if isinstance(value, dict) and "$each" in value:
                    array.extend(copy.deepcopy(value["$each"]))
                    if "$slice" in value:
                        del array[value["$slice"] :]
                else:
                    array.append(copy.deepcopy(value))
    return result


@contextmanager
def frozen_world(counter: Iterator[int]) -> Iterator[None]:
    """Ids from `counter` (all of one width, so a renamed id has the same size) and a
    frozen clock."""
    with mock.patch("mindstore.model.base.ID_SOURCE", lambda: f"id{next(counter):06d}"), \
            mock.patch("mindstore.model.base.CLOCK", lambda: 1_700_000_000.25):  # fmt: skip
        yield


# ---------------------------------------------------------------- the stored form


def header_steps(ops: list[Any]) -> list[TaskHeader]:
    """The header after each verb of a random sequence, on the in-memory Task."""
    headers = []

    async def run() -> None:
        counter = itertools.count()
        with frozen_world(counter):
            task = Task(id="T")
            task.add_task_config(CONFIG)
            headers.append(task.header.model_copy(deep=True))
            for step, op in enumerate(ops):
                await apply(op, step, task, False, "T")
                headers.append(task.header.model_copy(deep=True))

    asyncio.run(run())
    return headers


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_each_update_turns_the_stored_header_into_the_next_one(ops):
    headers = header_steps(ops)
    stored = stored_header(headers[0])
    for before, after in itertools.pairwise(headers):
        assert header_from_stored(stored_header(after), after.tail) == after
        stored = apply_update(stored, header_changes(before, after))
        assert header_from_stored(stored, after.tail) == after


def test_the_stored_form_leaves_out_what_it_can_derive():
    call = ToolCallRef(id="c1", name="delegate", index=3, part=0)
    header = TaskHeader(
        seq=6, size_bytes=900, open_tool_calls=[call],
        scope_stack=[ScopeFrame(entry_id="e1", index=4, model_name="m", fallback=call, trigger=call,
                                trigger_recorded=True)],
        usage=UsageTotals(tokens_in=10, cost=0.5),
    )  # fmt: skip
    stored = stored_header(header)
    assert "tail" not in stored
    assert stored["open_tool_calls"] == [{"id": "c1", "name": "delegate", "index": 3, "part": 0}]
    assert stored["scope_stack"] == [{"entry_id": "e1", "index": 4, "model_name": "m",
                                      "fallback": True, "trigger": "c1"}]  # fmt: skip
    assert stored["usage"] == {"in": 10, "cost": 0.5}
    assert header_from_stored(stored) == header
    # once the call is answered the frame keeps the call itself, and says it was recorded
    closed = header.model_copy(deep=True, update={"open_tool_calls": []})
    frame = stored_header(closed)["scope_stack"][0]
    assert frame["trigger"] == stored["open_tool_calls"][0] and frame["fallback"] is True
    assert header_from_stored(stored_header(closed)) == closed


def test_a_frame_leaves_out_the_model_of_the_last_config():
    """The innermost frame's model is usually the last config's (its own config message
    follows the entry): stored once, as `last_model_name`. A frame whose model differs
    keeps it, and one without a model says so (absent would read as the last model)."""
    outer = ScopeFrame(entry_id="e1", index=2, model_name="big")
    inner = ScopeFrame(entry_id="e2", index=5, model_name="small")
    unknown = ScopeFrame(entry_id="e3", index=8, model_name=None)
    header = TaskHeader(seq=9, scope_stack=[outer, inner], last_config_index=6,
                        last_model_name="small")  # fmt: skip
    stored = stored_header(header)
    assert [frame.get("model_name") for frame in stored["scope_stack"]] == ["big", None]
    assert "model_name" not in stored["scope_stack"][1]
    assert header_from_stored(stored) == header
    odd = header.model_copy(deep=True, update={"scope_stack": [outer, inner, unknown]})
    assert stored_header(odd)["scope_stack"][2] == {
        "entry_id": "e3",
        "index": 8,
        "model_name": None,
    }
    assert header_from_stored(stored_header(odd)) == odd
    # a config inside the inner level changes the last model: the inner frame's is written out
    moved = header.model_copy(
        deep=True, update={"last_model_name": "other", "last_config_index": 7}
    )
    changes = header_changes(header, moved)
    assert header_from_stored(apply_update(stored, changes)) == moved
    assert stored_header(moved)["scope_stack"][1]["model_name"] == "small"


def earlier_format(header: TaskHeader, message_id: str) -> dict[str, Any]:
    """The header fields as the previous version stored them: every field written out, the
    tail, the usage's long keys, each tool call with the id of its message."""
    fields = header.to_dict()
    for ref in fields["open_tool_calls"]:
        ref["message_id"] = message_id
    for frame in fields["scope_stack"]:
        for name in ("fallback", "trigger"):
            if frame[name] is not None:
                frame[name]["message_id"] = message_id
    return fields


def test_a_header_stored_by_the_previous_version_reads_the_same():
    call = ToolCallRef(id="c1", name="delegate", index=3, part=0)
    header = TaskHeader(seq=6, size_bytes=900, open_tool_calls=[call],
                        scope_stack=[ScopeFrame(entry_id="e1", index=4, fallback=call, trigger=call,
                                                trigger_recorded=True)],
                        usage=UsageTotals(tokens_in=10, tokens_out=2, cost=0.5))  # fmt: skip
    legacy = earlier_format(header, "a3")
    assert legacy["tail"] is None and legacy["usage"]["tokens_in"] == 10  # really the old form
    assert header_from_stored(legacy) == header
    # a short key written over an old document wins over the long one it replaces
    mixed = {**legacy, "usage": {**legacy["usage"], "in": 11}}
    assert header_from_stored(mixed).usage.tokens_in == 11


@pytest.mark.parametrize("fields,match", [
    ({"scope_stack": [{"entry_id": "e", "index": 1, "trigger": "nowhere"}]}, "trigger"),
    ({"usage": {"in": "lots"}}, "tokens_in"),
    ({"open_tool_calls": "x"}, "open_tool_calls"),
])  # fmt: skip
def test_malformed_stored_fields_are_refused_by_name(fields, match):
    with pytest.raises(ValueError, match=match):
        header_from_stored({"seq": 2, **fields})


# ---------------------------------------------------------------- the cached last message


def test_apply_sets_applies_paths_as_mongodb_does_or_gives_up():
    message = {"id": "a", "content": [{"type": "text", "text": "Hel"}], "status": "completed"}
    patched = apply_sets(message, {"content.0.text": "Hello",
                                   "content.1": {"type": "text", "text": "!"},
                                   "status": "loading", "usage.cost": 1})  # fmt: skip
    assert patched == {"id": "a", "content": [{"type": "text", "text": "Hello"},
                                              {"type": "text", "text": "!"}],
                       "status": "loading", "usage": {"cost": 1}}  # fmt: skip
    assert message["content"][0]["text"] == "Hel"  # a copy: the cached form is never shared
    assert apply_sets(message, {"content.5": {}}) is None  # past the end: MongoDB would pad
    assert apply_sets(message, {"status.x": 1}) is None  # into a string
    # a streamed chunk is pushed (the array made when missing); `$each` is not modelled
    chunked = apply_sets(message, {}, (), {"content.0.§more": "lo"})
    assert chunked is not None and chunked["content"][0]["§more"] == ["lo"]
    assert apply_sets(chunked, {}, (), {"content.0.§more": "!"})["content"][0]["§more"] == [
        "lo",
        "!",
    ]
    assert apply_sets(message, {}, (), {"status": "x"}) is None  # onto a string
    assert apply_sets(message, {}, (), {"content.0.§more": {"$each": ["a"]}}) is None


def test_the_kept_last_messages_stay_within_their_budget():
    cache = HeaderCache(capacity=3, tail_budget=100)
    header = TaskHeader()

    def entry(size: int) -> CachedHeader:
        return CachedHeader(1, dt.datetime(2026, 1, 1), header, {"x": "y"}, size)

    cache.put(("t", "a"), entry(60))
    cache.put(("t", "b"), entry(60))  # over budget: the older task loses its message first
    assert cache.get(("t", "a")).tail is None and cache.get(("t", "b")).tail is not None
    assert cache.tail_bytes == 60
    cache.put(("t", "b"), entry(30))  # replaced, not added
    cache.put(("t", "c"), entry(30))
    cache.put(("t", "d"), entry(30))  # capacity 3: "a" goes, with nothing to give back
    assert len(cache) == 3 and cache.tail_bytes == 90
    cache.forget(("t", "c"))
    assert cache.tail_bytes == 60
    cache.put(("t", "e"), entry(MAX_TAIL_BYTES + 1))  # too large to keep at all
    assert cache.get(("t", "e")).tail is None and cache.tail_bytes == 60


# ---------------------------------------------------------------- documents of the previous version


async def test_a_task_stored_by_the_previous_version_is_read_and_written(store):
    acme = store.scoped("acme")
    tid = (await acme.tasks.create(config=CONFIG)).id
    reply = await acme.tasks.add_assistant_message(tid)
    await acme.tasks.add_tool_call_part(
        tid, reply.id, ToolCallPart(tool_call_id="c1", tool_name="delegate")
    )
    await acme.tasks.add_task_entry(tid, [TextPart(text="sub")], CONFIG)
    await acme.tasks.finish_assistant_message(tid, reply.id, tokens_in=7, cost=0.25)
    header = await acme.tasks.header(tid)
    tasks, key = store.database["tasks"], f"acme/{tid}"
    legacy = earlier_format(header, reply.id)
    await tasks.update_one({"_id": key}, {"$set": legacy})  # the old form, tail included
    store.headers.forget(("acme", tid))
    raw = await tasks.find_one({"_id": key})
    assert raw["tail"]["id"] == header.tail.id and "tokens_in" in raw["usage"]
    check_task(await flat_task(store.database, key))  # backups of old documents still verify
    assert await acme.tasks.header(tid) == header
    # the next write plans from it, drops the old tail and stores what it changes compactly
    await acme.tasks.add_human_message(tid, "inside")
    raw = await tasks.find_one({"_id": key})
    assert "tail" not in raw
    check_task(await flat_task(store.database, key))  # the whole history, sealed pages included
    stored = await acme.tasks.messages(tid)
    assert (await acme.tasks.header(tid)).tail.id == stored[-1].id
    _exit_message, answer = await acme.tasks.add_task_exit(tid, [TextPart(text="done")])
    assert answer is not None and answer.content[0].tool_call_id == "c1"
    check_task(await flat_task(store.database, key))


# ---------------------------------------------------------------- two stores, one task


GENERATED = re.compile(r"id\d+$")


def renamed(value: Any, names: dict[str, str]) -> Any:
    if isinstance(value, str):
        return names.get(value, value)
    if isinstance(value, dict):
        return {key: renamed(item, names) for key, item in value.items()}
    if isinstance(value, list):
        return [renamed(item, names) for item in value]
    return value


async def alternating(ops: list[Any], writers: list[bool]) -> int:
    """The ops on an in-memory Task, and on one task through two stores in turn; how many
    updates the stores sent (more than writes: a stale guess is sent, refused, retried)."""
    first = await open_store()  # the suite's backend
    second = Store(first.backend)  # another process: its own locks and header cache
    try:
        repos = [first.scoped("prop").tasks, second.scoped("prop").tasks]
        memory_ids, store_ids = itertools.count(), itertools.count()
        with frozen_world(memory_ids):
            memory = Task(id="T")
            memory.add_task_config(CONFIG)
        await repos[0].create(task_id="T")
        with frozen_world(store_ids):
            await repos[0].add_task_config("T", CONFIG)
        updates = 0
        for step, op in enumerate(ops):
            repo = repos[int(writers[step % len(writers)])]
            with frozen_world(memory_ids):
                left = await apply(op, step, memory, False, "T")
            with frozen_world(store_ids), first.backend.recorder.capture(payloads=True) as log:
                right = await apply(op, step, repo, True, "T")
            # the verb's own updates; the seals and folds after its write are not its tries
            updates += len(split_housekeeping(log)[0].by_name("update"))
            # a retry after a stale cache plans again and draws fresh generated ids
            assert (left if isinstance(left, str) else left[0]) == (
                right if isinstance(right, str) else right[0]
            ), (step, op, left, right)
        stored = await repos[0].messages("T")
        assert len(stored) == len(memory.messages)
        names = {}  # generated ids (config and context messages) differ: match them by place
        for theirs, ours in zip(stored, memory.messages, strict=True):
            if theirs.id != ours.id:
                assert GENERATED.match(theirs.id) and GENERATED.match(ours.id)
                names[theirs.id] = ours.id
        assert [renamed(message_to_dict(m), names) for m in stored] == [
            message_to_dict(m) for m in memory.messages
        ]
        for repo in repos:
            header = await repo.header("T")
            assert renamed(unpaged(header).to_dict(), names) == memory.header.to_dict()
            await assert_paging(first.database, "prop/T", header)
        return updates
    finally:
        await close_store(first)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS, st.lists(st.booleans(), min_size=1, max_size=8))
def test_two_stores_writing_in_turns_end_as_the_in_memory_task(ops, writers):
    asyncio.run(alternating(ops, writers))


def test_two_stores_taking_turns_on_the_last_message():
    """Every verb on the last message, the two stores taking turns each time: each one's
    cached last message is stale whenever it writes."""
    ops = [("assistant",), ("text", "a"), ("reasoning",), ("text", "b"), ("call", "search"),
           ("finish", 3), ("text", "c"), ("answer", 0), ("assistant",), ("call", "delegate"),
           ("enter", True), ("assistant",), ("text", "d"), ("finish", 1), ("exit",)]  # fmt: skip
    updates = asyncio.run(alternating(ops, [False, True]))
    # stale guesses were sent and refused (a verb on a message the cache does not hold as
    # the last one reads first instead), and none of them wrote
    assert len(ops) < updates < 2 * len(ops)


async def test_a_stale_cached_message_costs_one_read_and_overwrites_nothing(store):
    mine = store.scoped("acme").tasks
    theirs = Store(store.backend).scoped("acme").tasks
    tid = (await mine.create(config=CONFIG)).id
    reply = await mine.add_assistant_message(tid)
    await mine.add_text_part(tid, reply.id, "one")  # our cache: the message with one part
    await theirs.add_text_part(tid, reply.id, "two")  # another process adds a second part
    with store.backend.recorder.capture() as log:
        await mine.add_text_part(tid, reply.id, "three")
    assert log.names() == ["update", "find", "update"]  # the cached guess, a read, the write
    with store.backend.recorder.capture() as log:
        await mine.add_text_part(tid, reply.id, "four")  # ours again: planned from the cache
    assert log.names() == ["update"]
    message = await mine.get_message(tid, reply.id)
    assert isinstance(message, AssistantMessage)
    assert [part.text for part in message.content] == ["one", "two", "three", "four"]


async def test_streams_of_two_stores_into_one_message_keep_both_parts(store):
    mine = store.scoped("acme").tasks
    theirs = Store(store.backend).scoped("acme").tasks
    tid = (await mine.create(config=CONFIG)).id
    reply = await mine.add_assistant_message(tid)
    async with mine.stream(tid, reply.id, flush_bytes=1, flush_ms=3_600_000) as ours:
        await ours.reasoning("plan")
        await theirs.add_tool_call_part(
            tid, reply.id, ToolCallPart(tool_call_id="t1", tool_name="search")
        )
        await ours.text("answer")  # a new part: its index comes from a fresh read, after the call
        async with theirs.stream(tid, reply.id, flush_bytes=1, flush_ms=3_600_000) as other:
            await other.text("theirs")
        await ours.text(" more")
    message = await mine.get_message(tid, reply.id)
    assert isinstance(message, AssistantMessage)
    kinds = [(part.type, getattr(part, "text", None)) for part in message.content]
    assert kinds == [
        ("reasoning", None),
        ("toolCall", None),
        ("text", "answer more"),
        ("text", "theirs"),
    ]
    header = await mine.header(tid)
    assert [ref.id for ref in header.open_tool_calls] == ["t1"]
    check_task(await flat_task(store.database, f"acme/{tid}"))


def test_the_cached_last_message_follows_unsets_too():
    from mindstore.repositories.header_cache import apply_sets

    stored = {"id": "a", "status": "completed", "content": [{"type": "text", "text": "x", "k": 1}]}
    after = apply_sets(
        stored, {"content.1": {"type": "text", "text": "y"}}, ["status", "content.0.k"]
    )
    assert after == {
        "id": "a",
        "content": [{"type": "text", "text": "x"}, {"type": "text", "text": "y"}],
    }
    assert stored["status"] == "completed"  # a copy: the cached document is not changed
    assert apply_sets(stored, {}, ["missing.field"]) == stored  # nothing there to remove
    assert apply_sets(stored, {}, ["content.0"]) is None  # a list item: forgotten, not guessed
    assert apply_sets(stored, {}, ["id.x"]) is None  # a step into a scalar
