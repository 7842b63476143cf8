"""`tasks.context(...)`: exactly what a model must see, read cheaply, compressed once per need.

The window rules (bookkeeping out, system prompts and the level's opening context kept,
tool calls paired, sub-task levels), the read bound (bytes and round trips from the
command recorder), the compression outcome recorded on its checkpoint, the window as a
sequence, and the same window whether the store read it in pieces or in memory whole.
"""

from __future__ import annotations

import asyncio
import math
import random
from unittest import mock

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import mindstore
from mindstore.compression import Compressor, StoredLevel, checkpoints_in
from mindstore.compression import context as context_module
from mindstore.compression.outcome import OUTCOME_KEY, outcome_of
from mindstore.compression.tokens import estimate_tokens
from mindstore.compression.toolpairs import call_ids, result_ids
from mindstore.compression.window import (
    ContextWindow,
    assemble,
    fit,
    model_view,
    pair_tool_calls,
    read_from_level,
)
from mindstore.errors import ValidationError
from mindstore.model.messages import (
    AssistantMessage,
    SystemMessage,
    ToolMessage,
    UserMessage,
    message_to_dict,
)
from mindstore.model.paging import PagePolicy
from mindstore.model.parts import (
    CompressionConfig,
    InformationalPart,
    TaskConfigPart,
    TextPart,
    ToolCallPart,
    ToolMetadata,
    ToolResultPart,
)
from mindstore.model.storage_form import bson_size
from mindstore.model.task import Task
from mindstore.store import Store

TOOLS = [ToolMetadata(name="delegate", is_task_entry=True), ToolMetadata(name="search")]
OFF = TaskConfigPart(
    model_name="m", tool_metadata=TOOLS, compression_config=CompressionConfig(enabled=False)
)
MODEL_ROLES = {"system", "user", "assistant", "tool", "informational"}


def config(limit: int, **kw) -> TaskConfigPart:
    return TaskConfigPart(model_name="m", tool_metadata=TOOLS,
                          compression_config=CompressionConfig(token_limit=limit,
                                                               **kw))  # fmt: skip


def pairs_intact(messages) -> bool:
    issued = {c for m in messages for c in call_ids(m)}
    answered = {c for m in messages for c in result_ids(m)}
    return issued == answered


def bookkeeping_free(messages) -> bool:
    for message in messages:
        if message.role not in MODEL_ROLES:
            return False
        if any(isinstance(p, InformationalPart) and not p.is_visible_ai for p in message.content):
            return False
        if message.role == "informational" and not any(
            getattr(p, "is_visible_ai", False) for p in message.content
        ):
            return False
    return True


def stored_bytes(messages) -> int:
    return sum(bson_size(message_to_dict(m)) for m in messages)


def tool_round(task: Task, tag: str, size: int = 40) -> None:
    task.add_human_message(f"{tag}: please look this up " + "q " * 10)
    assistant = task.add_assistant_message()
    task.add_text_part(assistant.id, f"searching for {tag}")
    task.add_tool_call_part(assistant.id, ToolCallPart(tool_call_id=f"c-{tag}", tool_name="search"))
    task.answer_tool_call(f"c-{tag}", {"hits": "h" * size})
    reply = task.add_assistant_message()
    task.add_text_part(reply.id, f"found it for {tag} " + "a " * 20)


def long_task(messages: int, part: TaskConfigPart = OFF, seed: int = 3) -> Task:
    """A conversation of about `messages` messages: a system prompt, tool rounds of
    uneven size, and a sub-task (entered and exited) every twelve rounds."""
    rng = random.Random(seed)
    task = Task()
    task.add_task_config(part)
    task.add_system_message("You are a careful research agent. " * 8)
    round_no = 0
    while len(task.messages) < messages:
        round_no += 1
        if round_no % 12 == 0:
            assistant = task.add_assistant_message()
            task.add_tool_call_part(
                assistant.id, ToolCallPart(tool_call_id=f"d{round_no}", tool_name="delegate")
            )
            task.add_task_entry([TextPart(text=f"sub-task {round_no}")], part)
            tool_round(task, f"in{round_no}", rng.randint(10, 600))
            task.add_task_exit([TextPart(text="done")])
        tool_round(task, f"r{round_no}", rng.randint(10, 1500))
    return task


def sized(store, page_messages: int | None = None):
    """Tenant `acme` on a store over the same backend with pages of `page_messages`
    messages (None: the default page size). The read-cost bounds below are stated for the
    default page size whatever the run's MINDSTORE_PAGE_MESSAGES: a paged read costs a
    row per page it counts, so its bytes and batches depend on the page size."""
    policy = PagePolicy() if page_messages is None else PagePolicy(page_messages=page_messages)
    return Store(store.backend, page_policy=policy).scoped("acme")


async def imported(acme, task: Task) -> str:
    return (await acme.tasks.import_task(task)).id


async def compression_count(acme, tid: str) -> int:
    return sum(1 for m in await acme.tasks.messages(tid) if m.role == "compression")


# ---------------------------------------------------------------- the window's rules


async def test_bookkeeping_never_reaches_the_model(acme):
    tasks = acme.tasks
    tid = (await tasks.create(config=OFF)).id
    await tasks.add_system_message(tid, "Be brief.")
    await tasks.add_informational_message(
        tid, "status", "indexing", is_visible_ai=False, is_visible_ui=True
    )
    await tasks.add_informational_message(tid, "note", "the user is on mobile", is_visible_ai=True)
    await tasks.add_message(tid, UserMessage(content=[
        TextPart(text="hello"),
        InformationalPart(is_visible_ui=True, details="typed on mobile")]))  # fmt: skip
    await tasks.add_message(tid, {"role": "custom_widget", "id": "w1", "payload": {"x": 1}})
    await tasks.add_human_message(tid, "and then?")
    compressor = Compressor("tool_compression", CompressionConfig(token_limit=10))
    await compressor.load(StoredLevel(tasks, tid))
    await compressor.compress()
    await tasks.add_task_config(tid, OFF)
    window = await tasks.context(tid)
    assert bookkeeping_free(window)
    assert [m.role for m in window] == ["system", "informational", "user", "user"]
    assert window[2].content == [TextPart(text="hello")]  # the UI-only part stayed behind
    assert window.left_out.ui_parts == 1
    # task config x2, hidden informational, unknown role
    # (the compression marker is not a view message)
    assert window.left_out.bookkeeping == 4
    sent = window.to_openai_chat()
    assert [m["role"] for m in sent] == ["system", "user", "user", "user"]
    assert (
        "indexing" not in repr(sent)
        and "typed on mobile" not in repr(sent)
        and "custom_widget" not in repr(sent)
    )


async def test_the_window_is_a_sequence_and_keeps_its_accounting(acme):
    task = long_task(60)
    tid = await imported(acme, task)
    window = await acme.tasks.context(tid, max_tokens=600)
    assert isinstance(window, ContextWindow)
    assert len(window) == len(window.messages) and list(window) == window.messages
    assert window[0] is window.messages[0] and window[-1] is window.messages[-1]
    assert window[1:3] == window.messages[1:3] and window.messages[-1] in window
    assert window.tokens == sum(estimate_tokens(m) for m in window) <= 600
    assert window.trimmed and window.left_out.trimmed > 0
    visible = model_view(task.current_task_messages())
    assert window.left_out.trimmed + len(window) - len(window.left_out.unpaired) <= len(visible) + 1
    assert window.to_openai_chat()[0]["role"] == "system"
    assert (
        window.to_anthropic()["system"] and window.to_gemini()["contents"] and window.to_responses()
    )


async def test_system_prompts_and_opening_context_are_kept_when_trimming(acme):
    tasks = acme.tasks
    task = long_task(200)
    task.add_system_message("From now on, answer in French.")
    for i in range(20):
        tool_round(task, f"late{i}")
    tid = await imported(acme, task)
    for budget in (300, 1_500, 6_000):
        window = await tasks.context(tid, max_tokens=budget)
        systems = [m for m in window if m.role == "system"]
        assert [m.text() for m in systems] == [
            "You are a careful research agent. " * 8,
            "From now on, answer in French.",
        ]
        assert window[0].role == "system" and bookkeeping_free(window) and pairs_intact(window)
        assert window.tokens <= budget
        # the others are the newest messages of the level, oldest possibly cut at its start
        rest = [m.id for m in window if m.role != "system"]
        level = [m.id for m in model_view(task.current_task_messages()) if m.role != "system"]
        assert (
            rest == level[len(level) - len(rest) :]
            or rest[1:] == level[len(level) - len(rest) + 1 :]
        )


async def test_a_sub_task_sees_its_own_level_and_its_description(acme):
    tasks = acme.tasks
    tid = (await tasks.create(config=OFF)).id
    await tasks.add_system_message(tid, "Root prompt.")
    await tasks.add_human_message(tid, "delegate the research")
    assistant = await tasks.add_assistant_message(tid)
    await tasks.add_tool_call_part(
        tid, assistant.id, ToolCallPart(tool_call_id="d1", tool_name="delegate")
    )
    await tasks.add_task_entry(tid, [TextPart(text="Research the moon landing."),
                                     InformationalPart(is_visible_ai=True,
                                                       details="deadline friday")],
                               OFF, entry_id="e1")  # fmt: skip
    for i in range(30):
        await tasks.add_human_message(tid, f"inner {i} " + "x " * 40)
    inside = await tasks.context(tid, max_tokens=250)
    texts = [m.text() for m in inside]
    assert inside.scope == "e1"
    assert (
        texts[0] == "Research the moon landing."
    )  # the description, pinned though the budget is small
    assert (
        inside[1].role == "informational"
        and "Root prompt." not in texts
        and "delegate the research" not in texts
    )
    assert texts[-1].startswith("inner 29") and bookkeeping_free(inside)
    await tasks.add_task_exit(tid, [TextPart(text="It happened in 1969.")])
    outside = await tasks.context(tid)
    assert [m.role for m in outside] == ["system", "user", "assistant", "tool"]
    assert pairs_intact(outside) and not any(m.text().startswith("inner") for m in outside)


async def test_tool_calls_and_results_are_never_split(acme):
    tasks = acme.tasks
    task = long_task(120)
    assistant = task.add_assistant_message()
    task.add_text_part(assistant.id, "let me check one more thing")
    task.add_tool_call_part(assistant.id, ToolCallPart(tool_call_id="open-1", tool_name="search"))
    tid = await imported(acme, task)
    for budget in range(150, 4_000, 137):
        window = await tasks.context(tid, max_tokens=budget)
        assert pairs_intact(window), budget
        assert "open-1" not in {c for m in window for c in call_ids(m)}
        assert (
            window[-1].text() == "let me check one more thing"
        )  # the open call left, its text stayed
        assert "open-1" in window.left_out.unpaired


def test_pairing_keeps_the_other_parts_and_drops_empty_messages():
    call = AssistantMessage(id="a", content=[
        TextPart(text="t"), ToolCallPart(tool_call_id="x", tool_name="s"),
        ToolCallPart(tool_call_id="y", tool_name="s")])  # fmt: skip
    result = ToolMessage(id="r", content=[ToolResultPart(tool_call_id="y", tool_name="s")])
    orphan = ToolMessage(id="o", content=[ToolResultPart(tool_call_id="z", tool_name="s")])
    lone = AssistantMessage(id="b", content=[ToolCallPart(tool_call_id="w", tool_name="s")])
    messages, unpaired = pair_tool_calls([call, result, orphan, lone])
    assert [m.id for m in messages] == ["a", "r"] and unpaired == ["w", "x", "z"]
    assert [getattr(p, "tool_call_id", None) for p in messages[0].content] == [None, "y"]
    assert call.content[1].tool_call_id == "x"  # the input is not changed


# ---------------------------------------------------------------- what a call reads


@pytest.mark.parametrize("auto_compress", [False, True])
async def test_a_window_read_is_bounded_by_the_window(store, auto_compress):
    acme = sized(store)  # the default page size: about 20 pages
    task = long_task(5_000, config(10_000_000))
    tid = await imported(acme, task)
    with store.backend.recorder.capture(payloads=True) as log:
        window = await acme.tasks.context(tid, max_tokens=32_000, auto_compress=auto_compress)
    with store.backend.recorder.capture(payloads=True) as whole:
        level = await acme.tasks.current_task_messages(tid)
    header_reply = log[0].bytes_received
    # 5,000 messages are paged: one pipeline still reads the window (the pages looked up
    # on the server), so the round trips and the bytes bound of an unpaged task (<= 3)
    assert (await acme.tasks.header(tid)).pages > 0
    assert log.round_trips <= 3 and log.names()[0] == "find" and "update" not in log.names()
    assert log.bytes_received <= 2 * stored_bytes(window) + header_reply, (
        log.bytes_received,
        stored_bytes(window),
    )
    # the window is mostly text; the whole level (lean stored messages) about 7 times it
    assert whole.bytes_received > 6 * log.bytes_received
    assert 31_000 <= window.tokens <= 32_000 and pairs_intact(window) and bookkeeping_free(window)
    expected = model_view(level)
    assert [m.id for m in window][-50:] == [m.id for m in expected][-50:]


async def test_a_paged_window_read_costs_the_same_commands_whatever_the_pages_it_spans(store):
    """Every page a window wants is sliced on the server in the same pipeline, so a window
    over a hundred 3-message pages costs the commands of one over a few: the header and
    one pipeline."""
    acme = sized(store, 3)
    tid = await imported(acme, long_task(1_500, config(10_000_000)))
    spans, commands = [], []
    for budget in (1_000, 30_000):
        with store.backend.recorder.capture(payloads=True) as log:
            window = await acme.tasks.context(tid, max_tokens=budget, auto_compress=False)
        spans.append(len(window))
        commands.append(len(log))
        assert window.tokens <= budget and pairs_intact(window) and bookkeeping_free(window)
    assert spans[1] > 20 * spans[0] and spans[1] > 300  # over a hundred pages
    assert commands[0] == commands[1] == 2, commands


async def test_a_sub_task_window_gets_no_row_from_the_pages_before_the_sub_task(store):
    acme = sized(store, 3)
    task = long_task(300)
    assistant = task.add_assistant_message()
    task.add_tool_call_part(assistant.id, ToolCallPart(tool_call_id="late", tool_name="delegate"))
    task.add_task_entry([TextPart(text="a late sub-task")], OFF)
    for i in range(7):
        task.add_human_message(f"in the sub-task {i}")
    tid = await imported(acme, task)
    assert (await acme.tasks.header(tid)).pages > 90
    with store.backend.recorder.capture(payloads=True) as log:
        window = await acme.tasks.context(tid, auto_compress=False)
    # the header, then one pipeline that counts the level in every page on the server:
    # the pages of the parent level hold nothing of this one and send nothing; only the
    # sub-task's messages travel (its entry, its description, its questions)
    assert log.names() == ["find", "aggregate"] and log.round_trips == 2, log.names()
    assert log[1].bytes_received <= stored_bytes(window) + 1_500, log[1].bytes_received
    assert [m.id for m in window] == [m.id for m in model_view(task.current_task_messages())]


@pytest.mark.parametrize("newer", ["open_version", "page_version"])
async def test_a_paged_read_starts_over_when_what_it_looked_up_is_newer_than_its_task(
    store, monkeypatch, newer
):
    """On a server, the pages and the task document a paged read looks up are not read at
    one snapshot with the task document its `$match` read: a seal or a fold may land in
    between. The row says which versions it saw; a row whose task document changed during
    the read (`open_version`) or that read a page newer than the task (`page_version`) is
    never used: the read starts over. Here the first row is made to look like that, its
    messages cut short, and the range read still returns the right messages."""
    from mindstore.compression.level_read import read_level_range

    acme, other = sized(store, 3), sized(store, 3)  # two processes writing one task
    tid = (await acme.tasks.create(config=OFF)).id
    for i in range(20):
        await acme.tasks.add_human_message(tid, f"question {i}")
    header = await acme.tasks.header(tid)
    assert header.pages and header.open_count >= 1
    wanted = (14, 6)  # the last six questions: from the last pages into the open page
    before = (await read_level_range(acme.tasks.port, tid, None, *wanted, paged=True))[2]
    assert [m.text() for m in before] == [f"question {i}" for i in range(14, 20)]

    scope = acme.tasks.port.scope
    original, raced = scope.aggregate_task, []

    async def changed_under_the_read(task_id, build, length=1):
        rows = await original(task_id, build, length)
        if not raced:  # another writer seals meanwhile; the row saw part of it
            raced.append(True)
            for i in range(6):
                await other.tasks.add_human_message(tid, f"later {i}")
            assert (await other.tasks.header(tid)).sealed > header.sealed
            rows[0][newer] = int(rows[0]["version"]) + 1
            rows[0]["o_run"], rows[0]["pieces"] = [], []
        return rows

    monkeypatch.setattr(scope, "aggregate_task", changed_under_the_read)
    after = (await read_level_range(acme.tasks.port, tid, None, *wanted, paged=True))[2]
    assert raced and [m.id for m in after] == [m.id for m in before]


async def test_a_widening_read_counts_again_after_a_seal_moved_its_pages(store):
    """A widening read reuses the page counts of the window read before it (it slices only
    the pages holding its range), but only at the task version they were read at: after a
    seal (a new page, the open page starting later) the positions moved, and it counts
    again on the server."""
    from mindstore.compression.level_read import read_level_range, read_level_window

    acme, other = sized(store, 3), sized(store, 3)  # two processes writing one task
    tid = (await acme.tasks.create(config=OFF)).id
    for i in range(20):
        await acme.tasks.add_human_message(tid, f"question {i}")
    header = await acme.tasks.port.scope.scope_header(tid)
    read = await read_level_window(acme.tasks.port, tid, header, head=1, tail=1)
    assert read.paged and read.paged_level is not None
    with store.backend.recorder.capture(payloads=True) as log:
        same = await read_level_range(
            acme.tasks.port, tid, None, 14, 6, paged=True, paged_level=read.paged_level
        )
    assert [m.text() for m in same[2]] == [f"question {i}" for i in range(14, 20)]
    # one pipeline, without the pass that looks every page up to count it
    lookups = [stage["$lookup"]["localField"] for stage in log[0].pipeline if "$lookup" in stage]
    assert len(log) == 1 and "pids" not in lookups and "wid" in lookups, lookups
    for i in range(6):  # another writer's appends seal the open page meanwhile
        await other.tasks.add_human_message(tid, f"later {i}")
    assert (await other.tasks.header(tid)).sealed > header.sealed
    moved = await read_level_range(
        acme.tasks.port, tid, None, 14, 6, paged=True, paged_level=read.paged_level
    )
    assert [m.id for m in moved[2]] == [m.id for m in same[2]]


@pytest.mark.parametrize("field", ["tenant", "task"])
async def test_a_looked_up_page_outside_the_view_is_never_read(store, field):
    """The window pipeline looks a task's pages up by `_id` (`$lookup` takes no filter in
    its portable form): a page that is not this tenant's, or does not name this task, is
    treated as absent, its messages neither counted nor sent."""
    from mindstore.documents import TASK_PAGES
    from mindstore.ids import page_key

    acme = sized(store, 3)
    tid = (await acme.tasks.create(config=OFF)).id
    for i in range(12):
        await acme.tasks.add_human_message(tid, f"question {i}")
    before = await acme.tasks.context(tid, auto_compress=False)
    pages = store.database[TASK_PAGES]
    second = {"_id": page_key(acme.tasks.port.scope.key(tid), 1), "tenant": "acme"}
    held = [m["id"] for m in (await pages.find_one(second))["messages"]]
    assert held and set(held) <= {m.id for m in before}  # three questions
    await pages.update_one(second, {"$set": {field: "someone-else"}})
    after = await acme.tasks.context(tid, auto_compress=False)
    assert [m.id for m in after] == [m.id for m in before if m.id not in held]


def test_the_paged_pipeline_unwinds_each_lookup_and_tests_what_it_found_first():
    """Pure: each `$lookup` of the paged window is followed by the `$unwind` of its result
    (MongoDB folds the two: no document holds all of a task's pages) and then by the test
    that the document found is in the view, before any stage reads it; every operator is
    in the portable subset; the task document found again is tested for the owner too."""
    from mindstore.pipelines.context_pages import paged_window_pipeline
    from mindstore.portable import ALLOWED, operators

    task = {"_id": "acme/t", "tenant": "acme", "owner": "ann"}
    for kwargs in ({"tail": 40}, {"start": 3, "count": 9}):
        pipeline = paged_window_pipeline(task, None, tenant="acme", owner="ann", head=6, **kwargs)
        assert operators(pipeline) <= ALLOWED, operators(pipeline) - ALLOWED
        lookups = [i for i, stage in enumerate(pipeline) if "$lookup" in stage]
        assert len(lookups) == 4
        for i in lookups:
            found = pipeline[i]["$lookup"]["as"]
            assert pipeline[i + 1] == {
                "$unwind": {"path": f"${found}", "preserveNullAndEmptyArrays": True}
            }
            assert list(pipeline[i + 2]) == ["$set"] and list(pipeline[i + 2]["$set"]) == ["own"]
            test = str(pipeline[i + 2]["$set"]["own"])
            assert f"${found}.tenant" in test and "acme" in test
            assert (f"${found}.owner" in test) == (pipeline[i]["$lookup"]["from"] == "tasks")
            # its fields are read in the next stage only, each behind the test
            read = pipeline[i + 3]["$set"]
            assert read and all(value["$cond"][0] == "$own" for value in read.values())
            assert f"${found}." not in str(pipeline[i + 4 :])


async def test_a_read_that_falls_short_widens_once(store):
    acme = sized(store)  # the default page size: one document, one pipeline per read
    task = long_task(400)
    for i in range(30):  # the newest messages are far smaller than the task's average
        task.add_human_message(f"short {i}")
    tid = await imported(acme, task)
    with store.backend.recorder.capture(payloads=True) as log:
        window = await acme.tasks.context(tid, max_tokens=3_000)
    assert log.round_trips == 3 and len(log.by_name("aggregate")) == 2
    whole = read_from_level(task.current_task_messages(), None, None)
    expected = pair_tool_calls(fit(assemble(whole), 3_000, estimate_tokens).messages)[0]
    assert [message_to_dict(m) for m in window] == [message_to_dict(m) for m in expected]


# ---------------------------------------------------------------- compression once per need


async def test_a_round_that_cannot_reach_the_limit_is_recorded_and_not_redone(store):
    acme = sized(store)  # the default page size: one document, one pipeline per read
    task = long_task(300, config(3_000, keep_recent_messages=4))
    tid = await imported(acme, task)
    first = await acme.tasks.context(tid, max_tokens=2_000)
    assert first.compressed_now and await compression_count(acme, tid) == 1
    stored = checkpoints_in(await acme.tasks.current_task_messages(tid))[-1]
    outcome = outcome_of(stored)
    assert outcome is not None and not outcome.reached and outcome.retry_after == 4
    assert [a.strategy for a in outcome.tried] == ["tool_compression"]
    assert outcome.tokens_before > outcome.tokens_after > 3_000
    assert any("could not reach token_limit 3000" in note for note in first.notes)
    for _ in range(3):
        with store.backend.recorder.capture(payloads=True) as log:
            again = await acme.tasks.context(tid, max_tokens=2_000)
        assert not again.compressed_now and "update" not in log.names() and log.round_trips <= 3
        assert any("tried again after" in note for note in again.notes)
        # the same window (the checkpoint's append only closed the last message's finished_ts)
        assert [(m.id, m.content) for m in again] == [(m.id, m.content) for m in first]
    assert await compression_count(acme, tid) == 1
    for i in range(3):  # not yet grown by keep_recent_messages (4) messages
        await acme.tasks.add_human_message(tid, f"more {i}")
    await acme.tasks.context(tid, max_tokens=2_000)
    assert await compression_count(acme, tid) == 1
    await acme.tasks.add_human_message(tid, "one more")
    await acme.tasks.context(
        tid, max_tokens=2_000
    )  # grown enough: tried again (and recorded again)
    assert await compression_count(acme, tid) == 2
    latest = checkpoints_in(await acme.tasks.current_task_messages(tid))[-1]
    assert outcome_of(latest).round == 2


async def test_nothing_to_compress_is_recorded_too(acme):
    tasks = acme.tasks
    tid = (await tasks.create(config=config(200))).id
    for i in range(12):
        await tasks.add_human_message(tid, f"plain message {i} " + "w " * 30)
    window = await tasks.context(tid)
    assert not window.compressed_now and await compression_count(acme, tid) == 1
    recorded = outcome_of(checkpoints_in(await tasks.current_task_messages(tid))[-1])
    assert recorded.tried[0].compressed == 0 and recorded.tokens_before == recorded.tokens_after
    assert window.checkpoint is not None and window.left_out.compressed == 0
    await tasks.context(tid)
    await tasks.context(tid)
    assert await compression_count(acme, tid) == 1


async def test_a_round_that_reached_the_limit_is_counted_on_not_reread(store):
    acme = sized(store)  # the default page size: one document, one pipeline per read
    tasks = acme.tasks
    task = long_task(300, config(6_000, strategy="compact_summarization", keep_recent_messages=6))
    tid = await imported(acme, task)
    first = await tasks.context(tid)
    assert (
        first.compressed_now
        and outcome_of(checkpoints_in(await tasks.current_task_messages(tid))[-1]).reached
    )
    summary = [m for m in first if (m.metadata or {}).get("mindstore_summary_of")]
    assert first.tokens <= 6_000 and first.left_out.compressed > 0 and len(summary) == 1
    assert [m.role for m in first][:3] == ["system", "user", "user"] and first[2] is summary[
        0
    ]  # after the head
    await tasks.add_human_message(tid, "a follow-up question")
    with store.backend.recorder.capture(payloads=True) as log:
        again = await tasks.context(tid, max_tokens=5_000)
    assert not again.compressed_now and log.round_trips <= 3 and "update" not in log.names()
    assert again[-1].text() == "a follow-up question"
    for i in range(40):  # the level grows past its limit again: a new round
        await tasks.add_human_message(tid, f"long follow-up {i} " + "z " * 200)
    later = await tasks.context(tid, max_tokens=5_000)
    assert later.compressed_now and await compression_count(acme, tid) == 2


async def test_a_chain_hands_over_to_the_next_strategy_in_one_write(acme):
    task = long_task(300, config(4_000, keep_recent_messages=6))
    tid = await imported(acme, task)
    window = await acme.tasks.context(tid, strategy=["tool_compression", "compact_summarization"])
    assert window.compressed_now and await compression_count(acme, tid) == 1
    latest = checkpoints_in(await acme.tasks.current_task_messages(tid))[-1]
    outcome = outcome_of(latest)
    assert [a.strategy for a in outcome.tried] == ["tool_compression", "compact_summarization"]
    assert outcome.reached and outcome.tried[0].tokens_after == outcome.tried[1].tokens_before
    assert outcome.tried[0].compressed > 0 and outcome.tried[1].compressed > 0 and latest.summary
    stored = (await acme.tasks.messages(tid))[-1]
    assert stored.content[0].strategies == ["tool_compression", "compact_summarization"]
    assert window.tokens == outcome.tokens_after <= 4_000 and pairs_intact(window)


async def test_an_outcome_carried_into_a_later_round_is_void(acme):
    task = long_task(200, config(2_000))
    tid = await imported(acme, task)
    await acme.tasks.context(tid)
    compressor = Compressor("compact_summarization", CompressionConfig(token_limit=2_000))
    await compressor.load(StoredLevel(acme.tasks, tid))
    await compressor.compress()  # carries the metadata (outcome included) over
    latest = checkpoints_in(await acme.tasks.current_task_messages(tid))[-1]
    assert OUTCOME_KEY in latest.metadata and outcome_of(latest) is None
    window = await acme.tasks.context(tid, max_tokens=1_500, auto_compress=False)
    assert window.left_out.compressed > 0 and pairs_intact(window)


# ---------------------------------------------------------------- stored == in memory


STRATEGIES = ["tool_compression", "truncate_and_summarize", "compact_summarization"]
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("round"), st.integers(0, 900)),
        st.tuples(st.just("human"), st.integers(0, 300)),
        st.tuples(st.just("system"), st.integers(0, 50)),
        st.tuples(st.just("hidden"), st.integers(0, 50)),
        st.tuples(st.just("enter"), st.integers(0, 1)),
        st.tuples(st.just("exit"), st.integers(0, 1)),
        st.tuples(st.just("open"), st.integers(0, 1)),
        st.tuples(st.just("compress"), st.sampled_from(STRATEGIES)),
    ),
    min_size=6,
    max_size=40,
)


async def _same_window(steps, budget: int) -> None:
    store = await mindstore.connect("embedded")
    try:
        tasks = store.scoped("prop").tasks
        tid = (await tasks.create(config=OFF)).id
        for n, (kind, size) in enumerate(steps):
            header = await tasks.header(tid)
            if kind == "round":
                await tasks.add_human_message(tid, "q " * (size // 10 + 1))
                assistant = await tasks.add_assistant_message(tid)
                await tasks.add_tool_call_part(
                    tid, assistant.id, ToolCallPart(tool_call_id=f"c{n}", tool_name="search")
                )
                await tasks.answer_tool_call(tid, f"c{n}", {"hits": "h" * size})
            elif kind == "human":
                await tasks.add_human_message(tid, "w " * size + "end")
            elif kind == "system":
                await tasks.add_system_message(tid, f"rule {n} " + "s " * size)
            elif kind == "hidden":
                await tasks.add_informational_message(
                    tid, "ui", "x" * size, is_visible_ai=bool(size % 2)
                )
            elif kind == "enter":
                await tasks.add_task_entry(tid, [TextPart(text=f"sub {n}")], OFF)
            elif kind == "exit" and header.current_scope is not None:
                await tasks.add_task_exit(tid, [TextPart(text="done")])
            elif kind == "open" and not header.open_tool_calls:
                assistant = await tasks.add_assistant_message(tid)
                await tasks.add_tool_call_part(
                    tid, assistant.id, ToolCallPart(tool_call_id=f"o{n}", tool_name="search")
                )
            elif kind == "compress":
                compressor = Compressor(
                    size, CompressionConfig(token_limit=200, keep_recent_messages=3)
                )
                await compressor.load(StoredLevel(tasks, tid))
                await compressor.compress()
        window = await tasks.context(tid, max_tokens=budget, auto_compress=False)
        task = await tasks.load(tid)
        level = task.current_task_messages()
        found = checkpoints_in(level)
        whole = read_from_level(level, task.current_scope(), found[-1] if found else None)
        expected = pair_tool_calls(fit(assemble(whole), budget, estimate_tokens).messages)[0]
        assert [message_to_dict(m) for m in window] == [message_to_dict(m) for m in expected], steps
        assert bookkeeping_free(window) and pairs_intact(window)
        view_systems = [
            m.id
            for m in model_view(level)
            if m.role == "system" and m.id not in set(found[-1].dropped_ids if found else [])
        ]
        assert [m.id for m in window if m.role == "system"] == view_systems
    finally:
        await store.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(STEPS, st.integers(20, 1_500), st.integers(1, 3), st.integers(1, 4))
@example(  # an opening context longer than the first read's head: still pinned (a seed found it)
    [("enter", 0), ("system", 0), ("system", 0), ("system", 0), ("hidden", 1), ("round", 0)],
    20,
    1,
    1,
)
def test_a_window_read_in_pieces_equals_the_level_read_whole(steps, budget, first, more):
    """The store reads the newest `first` messages, then `more` at a time while the
    budget is not filled (the sizing estimates forced small, so reads fall short and
    widen again and again); the window equals the one built from the whole level."""
    with mock.patch.object(context_module, "messages_for", lambda *_: first), \
            mock.patch.object(context_module, "messages_to_add", lambda *_: more):  # fmt: skip
        asyncio.run(_same_window(steps, budget))


# ---------------------------------------------------------------- unhappy paths


@pytest.mark.parametrize("kwargs, named", [
    ({"max_tokens": 0}, "max_tokens"), ({"max_tokens": -5}, "max_tokens"),
    ({"max_tokens": True}, "max_tokens"), ({"max_tokens": "100"}, "max_tokens"),
    ({"safety_buffer": -1}, "safety_buffer"),
    ({"auto_compress": "yes"}, "auto_compress"), ({"strategy": []}, "strategy"),
    ({"strategy": ["tool_compression", "nope"]}, "nope"), ({"token_counter": 3}, "token_counter"),
])  # fmt: skip
async def test_bad_arguments_are_typed_and_write_nothing(acme, store, kwargs, named):
    tid = await imported(acme, long_task(80, config(100)))
    before = await store.backend.database["tasks"].find_one({})
    with pytest.raises(ValidationError, match=named):
        await acme.tasks.context(tid, **kwargs)
    assert await store.backend.database["tasks"].find_one({}) == before


async def test_a_checkpoint_landing_between_two_reads_restarts_the_read(acme, monkeypatch):
    tasks = acme.tasks
    task = long_task(300)
    for i in range(60):  # enough for the first read, sized on the task's average, to fall short
        task.add_human_message(f"short {i}")
    tid = await imported(acme, task)
    from mindstore.compression import context as context_module

    original = context_module.read_level_range

    async def racing(*args, **kwargs):
        compressor = Compressor(
            "compact_summarization", CompressionConfig(token_limit=100, keep_recent_messages=4)
        )
        await compressor.load(StoredLevel(tasks, tid))
        await compressor.compress()
        return await original(*args, **kwargs)

    monkeypatch.setattr(context_module, "read_level_range", racing)
    window = await tasks.context(tid, max_tokens=3_000, auto_compress=False)
    monkeypatch.undo()
    assert window.left_out.compressed > 0 and window.checkpoint is not None
    fresh = await tasks.context(tid, max_tokens=3_000, auto_compress=False)
    assert [message_to_dict(m) for m in window] == [message_to_dict(m) for m in fresh]


async def test_a_level_without_messages_gives_an_empty_window(acme):
    tid = (await acme.tasks.create(config=OFF)).id
    window = await acme.tasks.context(tid, max_tokens=100)
    assert (
        len(window) == 0 and window.tokens == 0 and not window and window.left_out.bookkeeping == 1
    )
    assert SystemMessage not in [type(m) for m in window]


# ---------------------------------------------------------------- pure decisions


def test_compression_due_decides_from_what_was_read():
    from mindstore.compression.outcome import CompressionOutcome, Due, compression_due

    def due(**kw):
        base = {
            "token_limit": 1_000,
            "outcome": None,
            "visible_count": 50,
            "complete_tokens": None,
            "newest_tokens": [10] * 20,
            "read_tokens": 200,
            "bound": 900.0,
        }
        return compression_due(**{**base, **kw})

    assert (
        due(complete_tokens=1_001).compress is True and due(complete_tokens=1_000).compress is False
    )
    assert due().compress is False  # even the estimate from above stays under the limit
    assert due(bound=5_000.0).compress is None  # unknown: read the level whole
    assert due(read_tokens=1_200, bound=5_000.0).compress is True  # what was read alone passes
    reached = CompressionOutcome(round=1, tokens_before=3_000, tokens_after=950, token_limit=1_000,
                                 reached=True, visible_count=46)  # fmt: skip
    # the recorded tokens plus the 4 messages added since: no read of the level needed
    assert due(outcome=reached, bound=9e9) == Due(False, 990)
    assert due(outcome=reached, visible_count=52, bound=9e9) == Due(True, 1_010)
    assert due(outcome=reached, visible_count=80, bound=9e9).compress is None  # more new than read
    missed = reached.model_copy(update={"reached": False, "tokens_after": 2_000, "retry_after": 10})
    assert due(outcome=missed, complete_tokens=2_000).compress is False  # grown by 4 < 10
    assert "tried again after 6 more" in due(outcome=missed).note
    assert due(outcome=missed, visible_count=56, complete_tokens=2_000).compress is True
    assert (
        due(outcome=missed, token_limit=1_500, complete_tokens=2_000).compress is True
    )  # a new limit: try


def test_read_sizing_follows_the_averages():
    from mindstore.compression.window import STORED_OVERHEAD_BYTES, messages_for, messages_to_add

    assert messages_for(32_000, 800) > messages_for(32_000, 4_000) > 0
    assert messages_for(0, 800) >= 1 and messages_for(100, 10) >= 1
    # a quarter more than the estimate, so the usual read does not fall short
    assert (
        messages_for(10_000, STORED_OVERHEAD_BYTES + 4 * 96) == math.ceil(10_000 / 100 * 1.25) + 2
    )
    assert messages_to_add(1_000, 5_000, 50) == math.ceil(1_000 / 100 * 1.25) + 2
    assert messages_to_add(10, 0, 0) >= 1


@pytest.mark.parametrize("page_messages", [None, 3])
async def test_a_paged_window_costs_pinned_round_trips_with_and_without_a_checkpoint(
    store, page_messages
):
    """The round trips of a paged window, pinned (counts from the recorder, the same on a
    server): the header, then one pipeline (`pipelines.context_pages`: the checkpoint, the
    counts and the slices, the pages looked up on the server), and a widening read (the
    same pipeline) when the first fell short. Before: 7 without a checkpoint and 12 with
    one (15 over 3-message pages); then 6 and 7 with the checkpoint's id lists sent with
    every per-page query. A task of 1,000 messages (334 pages of 3; about 79,000 tokens
    at its level, twice the compression limit): the counts do not depend on the size."""
    acme = sized(store, page_messages)
    tid = await imported(acme, long_task(1_000, config(40_000)))
    assert (await acme.tasks.header(tid)).pages > (300 if page_messages else 0)
    with store.backend.recorder.capture(payloads=True) as plain:
        await acme.tasks.context(tid, max_tokens=16_000, auto_compress=False)
    first = await acme.tasks.context(tid, max_tokens=16_000)
    assert first.compressed_now and await compression_count(acme, tid) == 1
    with store.backend.recorder.capture(payloads=True) as marked:
        window = await acme.tasks.context(tid, max_tokens=16_000)
    assert not window.compressed_now and "update" not in marked.names()
    assert plain.names() == ["find", "aggregate"] and plain.round_trips == 2, plain.names()
    assert marked.names()[:2] == ["find", "aggregate"] and marked.round_trips <= 3, marked.names()
    assert set(marked.names()) == {"find", "aggregate"} and "task_pages" not in {
        c.collection for c in [*plain, *marked]
    }
