"""Compression on stored tasks: strategies per level, stacking, transform, auto-compression,
and the server-side context view equal to the same computation in memory."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mindstore
from mindstore.compression import (
    Compressor,
    MemoryLevel,
    StoredLevel,
    apply_checkpoint,
    checkpoints_in,
)
from mindstore.compression.toolpairs import call_ids, result_ids
from mindstore.compression.window import model_view
from mindstore.errors import NotFound, ValidationError
from mindstore.model.messages import message_to_dict
from mindstore.model.paging import PagePolicy
from mindstore.model.parts import (
    CompressionConfig,
    TaskConfigPart,
    TextPart,
    ToolCallPart,
    ToolMetadata,
)
from mindstore.store import Store

SMALL = CompressionConfig(token_limit=400, keep_recent_messages=3, keep_first_messages=1)
CONFIG = TaskConfigPart(model_name="m", compression_config=SMALL,
                        tool_metadata=[ToolMetadata(name="delegate", is_task_entry=True),
                                       ToolMetadata(name="search")])  # fmt: skip


async def tool_round(tasks, tid: str, tag: str, size: int = 300) -> None:
    await tasks.add_human_message(tid, f"{tag} " + "question " * 10)
    assistant = await tasks.add_assistant_message(tid)
    await tasks.add_tool_call_part(
        tid, assistant.id, ToolCallPart(tool_call_id=f"c-{tag}", tool_name="search")
    )
    await tasks.answer_tool_call(tid, f"c-{tag}", {"hits": "h" * size})


def pairs_intact(messages) -> bool:
    issued = {c for m in messages for c in call_ids(m)}
    return {c for m in messages for c in result_ids(m)} <= issued


def as_dicts(messages):
    return [message_to_dict(m) for m in messages]


async def stored_view(tasks, tid: str):
    return (await tasks.context(tid, auto_compress=False)).messages


async def memory_view(tasks, tid: str):
    """The same view computed in plain Python over the whole stored task: the level with
    its latest checkpoint applied, what a model may see of it."""
    task = await tasks.load(tid)
    level = task.current_task_messages()
    latest = checkpoints_in(level)
    return model_view(apply_checkpoint(level, latest[-1] if latest else None))


@pytest.mark.parametrize(
    "strategy", ["tool_compression", "truncate_and_summarize", "compact_summarization"]
)
async def test_each_strategy_inside_a_sub_task_then_at_the_parent(acme, strategy):
    tasks = acme.tasks
    tid = (await tasks.create(owner="o", config=CONFIG)).id
    for i in range(4):
        await tool_round(tasks, tid, f"root{i}")
    root_messages = await tasks.current_task_messages(tid)
    root_ids = {m.id for m in root_messages}
    await tasks.add_task_entry(tid, [TextPart(text="sub-task")], CONFIG, entry_id="entry1")
    for i in range(4):
        await tool_round(tasks, tid, f"sub{i}")

    inner = Compressor(strategy, SMALL)
    await inner.load(StoredLevel(tasks, tid))
    inner_view = await inner.compress()
    inner_checkpoint = inner.latest
    assert inner_checkpoint is not None
    assert not set(inner_checkpoint.compressed_message_ids) & root_ids  # parent untouched
    assert pairs_intact(inner_view)
    assert as_dicts(await stored_view(tasks, tid)) == as_dicts(model_view(inner_view))
    assert as_dicts(await inner.transform()) == as_dicts(inner_view)  # transform reproduces it

    await tasks.add_task_exit(tid, [TextPart(text="done")])
    parent_view = await stored_view(tasks, tid)
    assert {m.id for m in model_view(root_messages)} <= {
        m.id for m in parent_view
    }  # the sub-task checkpoint does not apply here
    outer = Compressor(strategy, SMALL)
    await outer.load(StoredLevel(tasks, tid))
    assert outer.checkpoints == []  # the sub-task's checkpoint belongs to its own level
    outer_view = await outer.compress()
    assert outer.latest is not None
    assert set(outer.latest.compressed_message_ids) <= root_ids | {m.id for m in parent_view}
    assert not set(outer.latest.compressed_message_ids) & set(
        inner_checkpoint.compressed_message_ids
    )
    assert pairs_intact(outer_view)
    assert as_dicts(await stored_view(tasks, tid)) == as_dicts(model_view(outer_view))
    assert as_dicts(await memory_view(tasks, tid)) == as_dicts(model_view(outer_view))
    # nothing was deleted: every message is still stored
    assert len(await tasks.messages(tid)) == len((await tasks.load(tid)).messages)
    assert {m.id for m in await tasks.messages(tid)} >= root_ids | set(
        inner_checkpoint.compressed_message_ids
    )


async def test_repeated_compression_stacks_checkpoints_and_summaries(acme):
    tasks = acme.tasks
    tid = (await tasks.create(config=CONFIG)).id
    compressor = Compressor("compact_summarization", SMALL)
    await compressor.load(StoredLevel(tasks, tid))
    for batch in range(3):
        for i in range(3):
            await tool_round(tasks, tid, f"b{batch}r{i}", size=50)
        await compressor.compress()
    assert len(compressor.checkpoints) == 3
    first, second, third = compressor.checkpoints
    assert (
        set(first.compressed_message_ids)
        < set(second.compressed_message_ids)
        < set(third.compressed_message_ids)
    )
    assert "b0r1" in third.summary and "b1r0" in third.summary  # the summary folds earlier ones in
    assert "b0r0" not in third.summary  # the head (first prompt) is kept, never summarised
    reloaded = Compressor("compact_summarization", SMALL)
    await reloaded.load(StoredLevel(tasks, tid))
    assert reloaded.checkpoints == compressor.checkpoints
    view = await reloaded.transform()
    assert [m.role for m in view][:3] == ["taskconfig", "user", "user"]  # head, summary, ...
    assert view[2].text() == third.summary


async def test_memory_and_store_compress_the_same_way(acme):
    tasks = acme.tasks
    tid = (await tasks.create(config=CONFIG)).id
    for i in range(5):
        await tool_round(tasks, tid, f"r{i}")
    in_memory = await tasks.load(tid)
    stored, memory = (
        Compressor("truncate_and_summarize", SMALL),
        Compressor("truncate_and_summarize", SMALL),
    )
    await stored.load(StoredLevel(tasks, tid))
    await memory.load(MemoryLevel(in_memory))
    await stored.compress()
    await memory.compress()
    assert stored.latest.compressed_message_ids == memory.latest.compressed_message_ids
    assert stored.latest.summary == memory.latest.summary
    assert in_memory.messages[-1].role == "compression"


async def test_context_auto_compresses_past_the_token_limit(acme):
    tasks = acme.tasks
    tid = (await tasks.create(config=CONFIG)).id
    await tool_round(tasks, tid, "small", size=10)
    window = await tasks.context(tid)
    assert not window.compressed_now and window.checkpoint is None  # under the limit
    for i in range(6):
        await tool_round(tasks, tid, f"big{i}")
    window = await tasks.context(tid, strategy="compact_summarization")
    assert window.compressed_now and window.checkpoint is not None
    stored = await tasks.messages(tid)
    assert stored[-1].role == "compression"  # the checkpoint was stored
    again = await tasks.context(tid, auto_compress=False)
    assert as_dicts(again.messages) == as_dicts(window.messages)
    assert again.tokens < sum(1 for _ in stored) * 1000


async def test_context_without_compression_enabled_and_with_a_token_budget(acme):
    tasks = acme.tasks
    disabled = CONFIG.model_copy(
        update={"compression_config": SMALL.model_copy(update={"enabled": False})}
    )
    tid = (await tasks.create(config=disabled)).id
    for i in range(6):
        await tool_round(tasks, tid, f"r{i}")
    window = await tasks.context(tid)
    assert not window.compressed_now and window.tokens > SMALL.token_limit
    trimmed = await tasks.context(tid, max_tokens=300)
    assert trimmed.trimmed and trimmed.tokens <= 300 and pairs_intact(trimmed.messages)
    assert trimmed.messages[0].role == "user" and "taskconfig" not in {
        m.role for m in trimmed
    }  # bookkeeping stays
    assert (await tasks.messages(tid))[-1].role != "compression"  # nothing written


async def test_context_errors_are_typed(acme):
    with pytest.raises(NotFound):
        await acme.tasks.context("missing")
    tid = (await acme.tasks.create(config=CONFIG)).id
    with pytest.raises(ValidationError):
        await acme.tasks.context(tid, strategy="nope")
    with pytest.raises(ValidationError):
        await Compressor("tool_compression").transform()  # not loaded


@pytest.mark.parametrize("page_messages", [None, 3])
async def test_stubbed_tool_results_do_not_travel(store, page_messages):
    # at the run's page size, and in 3-message pages: the level's head then lies in the
    # pages, and the open page's first messages (a kept 20 kB result) must not travel too
    policy = store.page_policy if page_messages is None else PagePolicy(page_messages=page_messages)
    tasks = Store(store.backend, page_policy=policy).scoped("acme").tasks
    tid = (await tasks.create(config=CONFIG)).id
    for i in range(6):
        await tool_round(tasks, tid, f"r{i}", size=20_000)
    compressor = Compressor("tool_compression", SMALL)
    await compressor.load(StoredLevel(tasks, tid))
    await compressor.compress()
    with store.backend.recorder.capture() as view_log:
        view = await stored_view(tasks, tid)
    with store.backend.recorder.capture() as full_log:
        await tasks.messages(tid)
    assert sum(1 for m in view if m.role == "tool") == 6  # every call still answered
    assert view_log.bytes_received * 3 < full_log.bytes_received


# ---------------------------------------------------------------- property: pipeline == memory
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("round"), st.integers(0, 400)),
        st.tuples(st.just("human"), st.integers(0, 200)),
        st.tuples(st.just("enter")),
        st.tuples(st.just("exit")),
        st.tuples(
            st.just("compress"),
            st.sampled_from(
                ["tool_compression", "truncate_and_summarize", "compact_summarization"]
            ),
        ),
    ),
    min_size=1,
    max_size=18,
)


async def _property_scenario(steps) -> None:
    store = await mindstore.connect("embedded")
    try:
        tasks = store.scoped("prop").tasks
        tid = (await tasks.create(config=CONFIG)).id
        counter = itertools.count()
        for step in steps:
            kind = step[0]
            if kind == "round":
                await tool_round(tasks, tid, f"r{next(counter)}", size=step[1])
            elif kind == "human":
                await tasks.add_human_message(tid, "w " * step[1])
            elif kind == "enter":
                await tasks.add_task_entry(tid, [TextPart(text="sub")], CONFIG)
            elif kind == "exit":
                if (await tasks.header(tid)).current_scope is not None:
                    await tasks.add_task_exit(tid, [TextPart(text="done")])
            else:
                compressor = Compressor(step[1], SMALL)
                await compressor.load(StoredLevel(tasks, tid))
                await compressor.compress()
            view = await stored_view(tasks, tid)
            assert as_dicts(view) == as_dicts(await memory_view(tasks, tid)), steps
            assert pairs_intact(view), steps
    finally:
        await store.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(STEPS)
def test_pipeline_view_equals_memory_view(steps):
    asyncio.run(_property_scenario(steps))
