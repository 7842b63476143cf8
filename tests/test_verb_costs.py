"""What each verb costs on the wire, counted by the command recorder (deterministic bytes).

Warm (this store wrote the task last): every append verb is one guarded update sending at
most its messages' stored BSON plus 512 B, and every verb on the last message (a part, a
stream write, the turn's finish) is one update too. Cold (another store): one header read
(which brings the last message), then the update. The two multi-message verbs whose
overhead grows with what they write have their own bounds, asserted below with the reason.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from mindstore.model.messages import AssistantMessage, UserMessage
from mindstore.model.parts import (
    ReasoningPart,
    TaskConfigPart,
    TextPart,
    ToolCallPart,
    ToolMetadata,
)
from mindstore.model.planner import derive_header
from mindstore.model.storage_form import bson_size
from mindstore.store import Store

LIMIT = 512
CONFIG = TaskConfigPart(
    model_name="openai/gpt-4o",
    tool_metadata=[ToolMetadata(name="search"), ToolMetadata(name="delegate", is_task_entry=True)],
)
SUB = TaskConfigPart(model_name="openai/gpt-4o-mini", tool_metadata=[ToolMetadata(name="search")])
WORDS = "lisbon hotel price flight search result agent context window token budget summary".split()
ENTRY_LIMIT = 600
"""A sub-task entry writes three messages (about 2,150 B here) and opens a level: the
header's frame for it (entry id, index, model, trigger call) and the last config's index
and model come on top of an append's usual fields. Measured: 589 B beyond the messages
with this test's 27-character database name; the frame is the header's own record of
the level, which a later verb plans from without reading the entry."""


def call(call_id: str, name: str = "search") -> ToolCallPart:
    return ToolCallPart(tool_call_id=call_id, tool_name=name, args={"query": "hotels", "limit": 5})


def assistant(call_id: str) -> AssistantMessage:
    return AssistantMessage(
        content=[ReasoningPart(reasoning="thinking"), TextPart(text=" ".join(WORDS)), call(call_id)],
        tokens_in=1500, tokens_out=300, cost=0.002,
    )  # fmt: skip


Action = Callable[[Any, str, dict[str, Any]], Awaitable[Any]]


async def keep(ctx: dict[str, Any], name: str, result: Awaitable[Any]) -> Any:
    ctx[name] = await result
    return ctx[name]


APPENDS: list[tuple[str, Action]] = [
    ("add_task_config", lambda t, i, c: t.add_task_config(i, CONFIG)),
    ("add_human_message", lambda t, i, c: t.add_human_message(i, " ".join(WORDS))),
    ("add_system_message", lambda t, i, c: t.add_system_message(i, "Answer briefly.")),
    ("add_informational_message", lambda t, i, c: t.add_informational_message(i, "progress", "searching")),
    ("add_message (assistant with a call and usage)", lambda t, i, c: t.add_message(i, assistant("k1"))),
    ("add_tool_result_message", lambda t, i, c: t.add_tool_result_message(i, "k1", "search", {"hits": []})),
    ("add_assistant_message", lambda t, i, c: keep(c, "a", t.add_assistant_message(i))),
    ("add_tool_call_part", lambda t, i, c: t.add_tool_call_part(i, c["a"].id, call("k2"))),
    ("answer_tool_call", lambda t, i, c: t.answer_tool_call(i, "k2", {"hits": ["a", "b"]})),
    ("add_messages (two)", lambda t, i, c: t.add_messages(i, [UserMessage(content=[TextPart(text="go")]),
                                                              assistant("k3")])),
    ("add_assistant_message (delegating)", lambda t, i, c: keep(c, "d", t.add_assistant_message(i))),
    ("add_tool_call_part (delegate)", lambda t, i, c: t.add_tool_call_part(i, c["d"].id, call("k4", "delegate"))),
    ("add_task_entry", lambda t, i, c: t.add_task_entry(i, [TextPart(text="find hotels")], SUB)),
    ("add_message (in the sub-task)", lambda t, i, c: t.add_message(i, assistant("k5"))),
    ("answer_tool_call (in the sub-task)", lambda t, i, c: t.answer_tool_call(i, "k5", {"hits": []})),
    ("add_task_exit", lambda t, i, c: t.add_task_exit(i, [TextPart(text="three hotels")])),
    ("add_compression_message", lambda t, i, c: t.add_compression_message(
        i, 1, 3, "budget", ["drop"], c["ids"][1:3], c["ids"][3:4])),
    ("add_assistant_message (last)", lambda t, i, c: keep(c, "e", t.add_assistant_message(i))),
    ("add_reasoning_part", lambda t, i, c: t.add_reasoning_part(i, c["e"].id, "thinking")),
    ("add_text_part", lambda t, i, c: t.add_text_part(i, c["e"].id, "the answer")),
    ("finish_assistant_message", lambda t, i, c: t.finish_assistant_message(
        i, c["e"].id, tokens_in=10, tokens_out=2, cost=0.001)),
    ("redact", lambda t, i, c: t.redact(i, c["e"].id, "privacy")),
]  # fmt: skip
PART_VERBS = {"add_tool_call_part", "add_tool_call_part (delegate)", "add_reasoning_part",
              "add_text_part", "finish_assistant_message", "redact"}  # fmt: skip


async def run_script(store: Store, tasks: Any) -> list[tuple[str, Any, int]]:
    """Run every verb once on a fresh task; (name, command log, bytes of appended messages)."""
    tid = (await tasks.create(config=CONFIG)).id
    for i in range(4):
        await tasks.add_human_message(tid, f"earlier {i}")
    ctx: dict[str, Any] = {"ids": [m.id for m in await tasks.messages(tid)]}
    tasks_db = store.database["tasks"]
    rows = []
    for name, action in APPENDS:
        before = (await tasks_db.find_one({"_id": f"acme/{tid}"}))["messages"]
        with store.backend.recorder.capture() as log:
            await action(tasks, tid, ctx)
        after = (await tasks_db.find_one({"_id": f"acme/{tid}"}))["messages"]
        appended = sum(bson_size(m) for m in after[len(before) :])
        rows.append((name, log, appended))
    stored = await tasks.messages(tid)
    assert await tasks.header(tid) == derive_header(tid, stored).model_copy(
        update={"tail": (await tasks.header(tid)).tail}
    )
    return rows


async def test_every_verb_warm_is_one_update_within_the_limit(acme, store):
    over = []
    for name, log, appended in await run_script(store, acme.tasks):
        assert log.names() == ["update"], (name, log.names())
        if name in PART_VERBS:
            continue
        beyond = log.bytes_sent - appended
        limit = ENTRY_LIMIT if name == "add_task_entry" else LIMIT
        if beyond > limit:
            over.append((name, beyond))
    assert over == []


async def test_every_verb_cold_reads_once_then_updates(store):
    cold = Store(store.backend, header_cache_size=0).scoped("acme").tasks
    for name, log, _appended in await run_script(store, cold):
        # one read of the header with the last message; a part verb on an earlier
        # message would need one more (none in this script: they all change the last)
        assert log.names() == ["find", "update"], (name, log.names())


async def test_a_warm_append_costs_the_same_at_any_history_length(acme, store):
    """The update carries the new message and the changed header fields, never the history."""
    costs = []
    for history in (5, 400):
        earlier = [UserMessage(content=[TextPart(text=f"m {i}")]) for i in range(history)]
        tid = (await acme.tasks.create(config=CONFIG, messages=earlier)).id
        await acme.tasks.add_human_message(tid, "warm")
        with store.backend.recorder.capture() as log:
            await acme.tasks.add_message(tid, assistant("h1"))
        costs.append(log.bytes_sent)
    assert costs[1] - costs[0] <= 8  # `messages.5` vs `messages.400`, size_bytes' digits


async def test_a_streamed_turn_is_one_update_per_write(acme, store):
    tid = (await acme.tasks.create(config=CONFIG)).id
    await acme.tasks.add_human_message(tid, "warm")
    words = [w + " " for w in WORDS * 10]
    with store.backend.recorder.capture() as log:
        await acme.tasks.add_human_message(tid, "tell me")
        async with acme.tasks.stream(tid, flush_bytes=256, flush_ms=3_600_000) as s:
            await s.reasoning("planning the answer")
            for word in words:
                await s.text(word)
        await acme.tasks.add_tool_call_part(tid, s.message_id, call("s1"))
        await acme.tasks.finish_assistant_message(tid, s.message_id, tokens_in=5, tokens_out=9)
        await acme.tasks.answer_tool_call(tid, "s1", {"hits": []})
    # human, the stream's new message, its writes, the call, the finish, the answer
    assert s.writes >= 3
    assert log.names() == ["update"] * (5 + s.writes)
    message = await acme.tasks.get_message(tid, s.message_id)
    assert isinstance(message, AssistantMessage)
    assert message.text().strip() == "".join(words).strip()


@pytest.mark.parametrize("count", [1, 3])
async def test_the_guard_names_the_callers_ids_and_the_first_new_one(acme, store, count):
    """A sub-task entry's config and context messages get fresh ids from the planner: the
    exactly-once guard holds the entry's id only; `add_messages` holds every id it was given."""
    tid = (await acme.tasks.create(config=CONFIG)).id
    await acme.tasks.add_human_message(tid, "go")
    with store.backend.recorder.capture(payloads=True) as log:
        await acme.tasks.add_task_entry(tid, [TextPart(text="sub")], SUB, entry_id="e1")
        given = [UserMessage(id=f"g{n}", content=[TextPart(text="x")]) for n in range(count)]
        await acme.tasks.add_messages(tid, given)
    entry, several = (c.filter["messages.id"] for c in log.by_name("update"))
    assert entry == {"$ne": "e1"}
    assert several == ({"$ne": "g0"} if count == 1 else {"$nin": [m.id for m in given]})

