"""What each verb costs on the wire, counted by the command recorder (deterministic bytes).

Warm (this store wrote the task last): every append verb is one guarded update sending at
most its messages' stored BSON plus 512 B, and every verb on the last message (a part, a
stream write, the turn's finish) is one update too. Cold (another store): one header read
(which brings the last message), then the update. The two multi-message verbs whose
overhead grows with what they write have their own bounds, asserted below with the reason.

Paged (the suite also runs with 3-message pages), each verb's own step is still that one
update (or read and update), and what paging adds is counted as what it is
(`check_paging_costs`): page reads only for an earlier message in a sealed page that the
verb changes or requires, a seal exactly when the write moved the paging mark, a fold
after a change to a sealed message, whose `pending` entries are counted as the in-place
patch they stand for.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from layout import assert_paging, read_layout, split_housekeeping, unpaged
from mindstore.backends.recorder import CommandLog
from mindstore.model.messages import AssistantMessage, UserMessage
from mindstore.model.parts import (
    ReasoningPart,
    TaskConfigPart,
    TextPart,
    ToolCallPart,
    ToolMetadata,
)
from mindstore.model.plans import derive_header
from mindstore.model.storage_form import bson_size
from mindstore.store import Store

LIMIT = 512
CONFIG = TaskConfigPart(
    model_name="openai/gpt-4o",
    tool_metadata=[ToolMetadata(name="search"), ToolMetadata(name="delegate", is_task_entry=True)],
)
SUB = TaskConfigPart(model_name="openai/gpt-4o-mini", tool_metadata=[ToolMetadata(name="search")])
WORDS = [
    "lisbon",
    "hotel",
    "price",
    "flight",
    "search",
    "result",
    "agent",
    "context",
    "window",
    "token",
    "budget",
    "summary",
]


def call(call_id: str, name: str = "search") -> ToolCallPart:
    return ToolCallPart(tool_call_id=call_id, tool_name=name, args={"query": "hotels", "limit": 5})


def assistant(call_id: str) -> AssistantMessage:
    return AssistantMessage(
        content=[ReasoningPart(reasoning="thinking"), TextPart(text=" ".join(WORDS)),
                 call(call_id)],
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
    ("add_informational_message",
     lambda t, i, c: t.add_informational_message(i, "progress", "searching")),
    ("add_message (assistant with a call and usage)",
     lambda t, i, c: t.add_message(i, assistant("k1"))),
    ("add_tool_result_message",
     lambda t, i, c: t.add_tool_result_message(i, "k1", "search", {"hits": []})),
    ("add_assistant_message", lambda t, i, c: keep(c, "a", t.add_assistant_message(i))),
    ("add_tool_call_part", lambda t, i, c: t.add_tool_call_part(i, c["a"].id, call("k2"))),
    ("answer_tool_call", lambda t, i, c: t.answer_tool_call(i, "k2", {"hits": ["a", "b"]})),
    ("add_messages (two)",
     lambda t, i, c: t.add_messages(i, [UserMessage(content=[TextPart(text="go")]),
                                        assistant("k3")])),
    ("add_assistant_message (delegating)",
     lambda t, i, c: keep(c, "d", t.add_assistant_message(i))),
    ("add_tool_call_part (delegate)",
     lambda t, i, c: t.add_tool_call_part(i, c["d"].id, call("k4", "delegate"))),
    ("add_task_entry", lambda t, i, c: t.add_task_entry(i, [TextPart(text="find hotels")], SUB)),
    ("add_message (in the sub-task)", lambda t, i, c: t.add_message(i, assistant("k5"))),
    ("answer_tool_call (in the sub-task)",
     lambda t, i, c: t.answer_tool_call(i, "k5", {"hits": []})),
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


REFERS: dict[str, tuple[str, Callable[[dict[str, Any]], list[str]]]] = {
    "add_tool_result_message": ("changes", lambda c: ["k1"]),
    "answer_tool_call": ("changes", lambda c: ["k2"]),
    "answer_tool_call (in the sub-task)": ("changes", lambda c: ["k5"]),
    "add_task_exit": ("changes", lambda c: ["k4"]),  # answers the delegate call
    "add_compression_message": ("requires", lambda c: c["ids"][1:4]),
}
"""Earlier messages a verb changes (a call's flags, named by the call id) or requires (a
compression message's references, by message id); every other verb appends, or changes
the last message."""


@dataclass
class Step:
    """One verb of the script: its own commands, and the seals and folds its write left."""

    name: str
    own: CommandLog
    housekeeping: list[str]
    appended: int
    sealed: tuple[int, int]  # the paging mark before and after
    earlier_sealed: bool  # it changes or requires a message that was in a sealed page


def _index(messages: list[dict[str, Any]], ref: str) -> int:
    for index, message in enumerate(messages):
        parts = message.get("content") or []
        calls = [p.get("tool_call_id") for p in parts if p.get("type") == "toolCall"]
        if message.get("id") == ref or ref in calls:
            return index
    raise AssertionError(f"no message {ref!r}")


async def run_script(store: Store, tasks: Any) -> list[Step]:
    """Run every verb once on a fresh task; each verb's `Step`."""
    tid = (await tasks.create(config=CONFIG)).id
    key = f"acme/{tid}"
    for i in range(4):
        await tasks.add_human_message(tid, f"earlier {i}")
    ctx: dict[str, Any] = {"ids": [m.id for m in await tasks.messages(tid)]}
    steps = []
    for name, action in APPENDS:
        before = await read_layout(store.database, key)
        with store.backend.recorder.capture(payloads=True) as log:
            await action(tasks, tid, ctx)
        after = await read_layout(store.database, key)
        appended = sum(bson_size(m) for m in after.messages[len(before.messages) :])
        refs = REFERS[name][1](ctx) if name in REFERS else []
        earlier = any(_index(before.messages, ref) < before.sealed for ref in refs)
        own, housekeeping = split_housekeeping(log)
        marks = (before.sealed, after.sealed)
        steps.append(Step(name, own, housekeeping, appended, marks, earlier))
    stored = await tasks.messages(tid)
    header = await tasks.header(tid)
    assert unpaged(header) == derive_header(tid, stored).model_copy(update={"tail": header.tail})
    await assert_paging(store.database, key, header)
    return steps


def check_paging_costs(step: Step, *, summaries_read: bool = False) -> None:
    """What paging adds to a verb, and only that (nothing at all while the history fits
    in the task document): reads of a sealed page for an earlier message the verb changes
    or requires (which message holds a call, whether referenced ids are stored); a seal
    after the write exactly when it moved the paging mark; a fold after a change to a
    sealed message. `summaries_read`: the verb also read the task's compression messages,
    sealed pages included (one aggregate)."""
    on_pages = [c.name for c in step.own if c.collection == "task_pages"]
    if summaries_read and step.sealed[0]:
        assert "aggregate" in on_pages, (step.name, on_pages)
        on_pages.remove("aggregate")
    assert bool(on_pages) == step.earlier_sealed and set(on_pages) <= {"find", "aggregate"}, (
        step.name, on_pages)  # fmt: skip
    sealed = step.sealed[1] > step.sealed[0]
    changes_sealed = step.earlier_sealed and REFERS[step.name][0] == "changes"
    expected = ["fold"] * changes_sealed + ["seal"] * sealed
    assert step.housekeeping == expected, (step.name, step.housekeeping, expected)


def sealed_ids_surcharge(update: Any) -> int:
    """Bytes the exactly-once clauses over sealed pages add to a paged task's append: one
    `{"id_filter.<w>": {"$not": {"$bitsAllSet": mask}}}` per caller-named id (model/id_filter.py),
    each at most 64 bytes, and nothing on a task never paged."""
    query = update.filter or {}
    nested = query.get("$and") or []
    clauses = {k: v for k, v in query.items() if k.startswith("id_filter.")}
    inner = [c for c in nested if next(iter(c)).startswith("id_filter.")]
    for path, test in [*clauses.items(), *(next(iter(c.items())) for c in inner)]:
        assert bson_size({path: test}) - 5 <= 64, (path, test)
    if not clauses and not inner:
        return 0
    rest = {k: v for k, v in query.items() if not k.startswith("id_filter.") and k != "$and"}
    others = [c for c in nested if c not in inner]
    if others:
        rest["$and"] = others
    return bson_size(query) - bson_size(rest)


def sealed_change_surcharge(update: Any) -> int:
    """Bytes a change to a sealed message costs beyond the same change in place: it is
    sent as `pending` entries (message id, index, path, value) and `pending_at` instead of
    ``messages.<i>.<path>: value`` (docs/write-paths.md, "Paged storage")."""
    pending = (update.update.get("$push") or {}).get("pending")
    if pending is None:
        return 0
    entries = pending["$each"]
    sent = bson_size({"pending": pending, "pending_at": update.update["$set"]["pending_at"]})
    in_place = bson_size({f"messages.{e['i']}.{e['p']}": e.get("v") for e in entries})
    return sent - in_place


async def test_every_verb_warm_is_one_update_within_the_limit(acme, store):
    over = []
    for step in await run_script(store, acme.tasks):
        on_task = [c.name for c in step.own if c.collection == "tasks"]
        assert on_task == ["update"], (step.name, step.own.names())
        check_paging_costs(step)
        if step.name in PART_VERBS:
            continue
        (update,) = step.own.by_name("update")
        beyond = (update.bytes_sent - step.appended - sealed_change_surcharge(update)
                  - sealed_ids_surcharge(update))  # fmt: skip
        if beyond > LIMIT:
            over.append((step.name, beyond))
    assert over == []


async def test_every_verb_cold_reads_once_then_updates(store):
    cold = Store(store.backend, header_cache_size=0).scoped("acme").tasks
    for step in await run_script(store, cold):
        # one read of the header with the last message; a part verb on an earlier
        # message would need one more (none in this script: they all change the last)
        on_task = [c.name for c in step.own if c.collection == "tasks"]
        # redact then looks for compression summaries written from the message, unless it
        # knows the message is the last (a store without a header cache does not)
        looks = ["aggregate"] if step.name == "redact" else []
        assert on_task == ["find", "update", *looks], (step.name, step.own.names())
        check_paging_costs(step, summaries_read=bool(looks))


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
async def test_the_guard_names_the_callers_ids_only(acme, store, count):
    """The exactly-once guard holds the ids the caller named (a replay of the call carries
    them again): a sub-task entry's own id, `add_messages`' ids. Ids the store generates (an
    entry called without `entry_id`, its config and context messages) are fresh, and a
    replay would not carry them: no guard for them."""
    tid = (await acme.tasks.create(config=CONFIG)).id
    await acme.tasks.add_human_message(tid, "go")
    logs = []
    given = [UserMessage(id=f"g{n}", content=[TextPart(text="x")]) for n in range(count)]
    for verb in (lambda: acme.tasks.add_task_entry(tid, [TextPart(text="sub")], SUB, entry_id="e1"),
                 lambda: acme.tasks.add_messages(tid, given),
                 lambda: acme.tasks.add_task_entry(tid, [TextPart(text="deeper")], SUB),
                 lambda: acme.tasks.add_human_message(tid, "unnamed")):  # fmt: skip
        with store.backend.recorder.capture(payloads=True) as log:
            await verb()
        logs.append(split_housekeeping(log)[0])  # the verb's own update, not a seal's
    filters = [log.by_name("update")[0].filter for log in logs]
    assert filters[0]["messages.id"] == {"$ne": "e1"}
    assert filters[1]["messages.id"] == (
        {"$ne": "g0"} if count == 1 else {"$nin": [m.id for m in given]}
    )
    assert "messages.id" not in filters[2] and "messages.id" not in filters[3]
