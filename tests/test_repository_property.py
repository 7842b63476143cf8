"""Property: the store and the in-memory `Task` agree after any sequence of verbs.

Both run the same random verbs with the same ids and a frozen clock. Afterwards the stored
messages and header must equal the in-memory ones, and every pipeline (current level,
boundaries of each sub-task, spans) must equal the in-memory reference computation.
"""

from __future__ import annotations

import asyncio
import itertools
from contextlib import contextmanager
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import close_store, open_store
from layout import assert_header
from mindstore.errors import MindstoreError
from mindstore.model.levels import level_boundaries, sub_task_spans
from mindstore.model.messages import UnknownMessage, message_to_dict
from mindstore.model.parts import (
    InformationalPart,
    TaskConfigPart,
    TextPart,
    ToolCallPart,
    ToolMetadata,
)
from mindstore.model.task import Task

CONFIG = TaskConfigPart(
    model_name="root-model",
    tool_metadata=[ToolMetadata(name="delegate", is_task_entry=True), ToolMetadata(name="search")],
)
SUB = TaskConfigPart(
    model_name="sub-model", tool_metadata=[ToolMetadata(name="delegate", is_task_entry=True)]
)

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("human"), st.text(max_size=12)),
        st.tuples(st.just("assistant")),
        st.tuples(st.just("call"), st.sampled_from(["delegate", "search"])),
        st.tuples(st.just("answer"), st.integers(0, 3)),
        st.tuples(st.just("enter"), st.booleans()),
        st.tuples(st.just("exit")),
        st.tuples(st.just("text"), st.text(min_size=1, max_size=8)),
        st.tuples(st.just("reasoning")),
        st.tuples(st.just("finish"), st.integers(0, 500)),
        st.tuples(st.just("unknown")),
        st.tuples(st.just("config")),
    ),
    max_size=30,
)


@contextmanager
def frozen_world(counter):
    with (
        mock.patch("mindstore.model.base.ID_SOURCE", lambda: f"id{next(counter)}"),
        mock.patch("mindstore.model.base.CLOCK", lambda: 1_700_000_000.25),
    ):
        yield


def _last_assistant(messages):
    for message in reversed(messages):
        if message.role == "assistant":
            return message.id
    return None


async def apply(op, step, target, is_store, tid):
    """Run one op on the in-memory task or the repository; return an error class name."""
    kind = op[0]
    call = (
        (lambda name, *a, **k: getattr(target, name)(tid, *a, **k))
        if is_store
        else (lambda name, *a, **k: getattr(target, name)(*a, **k))
    )
    messages = (await target.messages(tid)) if is_store else target.messages
    header = (await target.header(tid)) if is_store else target.header
    try:
        if kind == "human":
            result = call("add_human_message", op[1] or None, message_id=f"h{step}")
        elif kind == "assistant":
            result = call("add_assistant_message", f"a{step}")
        elif kind == "call":
            target_id = _last_assistant(messages)
            if target_id is None:
                return "skip"
            part = ToolCallPart(tool_call_id=f"c{step}", tool_name=op[1], args={"$q": step})
            result = call("add_tool_call_part", target_id, part)
        elif kind == "answer":
            calls = header.open_tool_calls
            if not calls:
                return "skip"
            result = call(
                "answer_tool_call", calls[op[1] % len(calls)].id, {"n": step}, message_id=f"r{step}"
            )
        elif kind == "enter":
            description = [TextPart(text=f"sub {step}")]
            if op[1]:
                description.append(InformationalPart(details="ctx", is_visible_ai=True))
            result = call("add_task_entry", description, SUB, f"e{step}")
        elif kind == "exit":
            result = call(
                "add_task_exit",
                [TextPart(text=f"done {step}")],
                "task_result",
                None,
                f"x{step}",
                f"xr{step}",
            )
        elif kind == "text":
            target_id = _last_assistant(messages)
            if target_id is None:
                return "skip"
            result = call("add_text_part", target_id, op[1])
        elif kind == "reasoning":
            target_id = _last_assistant(messages)
            if target_id is None:
                return "skip"
            result = call("add_reasoning_part", target_id, "think", "sig")
        elif kind == "finish":
            target_id = _last_assistant(messages)
            if target_id is None:
                return "skip"
            result = call(
                "finish_assistant_message", target_id, tokens_in=op[1], tokens_out=1, cost=0.5
            )
        elif kind == "unknown":
            result = call(
                "add_message",
                UnknownMessage.model_validate(
                    {"role": "plugin", "id": f"u{step}", "blob": [1, {"$x": 2}]}
                ),
            )
        else:
            result = call("add_task_config", CONFIG)
        if asyncio.iscoroutine(result):
            result = await result
        if result is False:  # seed-style failure of an in-memory part verb
            return "failed"
        if kind in {"text", "reasoning", "call"}:  # the Mind Map's part verbs answer True
            return "ok"
        return ("ok", normalized(result))
    except MindstoreError as exc:
        return (
            "failed"
            if type(exc).__name__ in {"NotFound", "InvalidTransition", "ValidationError"}
            else type(exc).__name__
        )


def normalized(result):
    """A verb's return value in comparable form: messages as their stored dicts."""
    if isinstance(result, tuple):
        return tuple(normalized(item) for item in result)
    if isinstance(result, list):
        return [normalized(item) for item in result]
    if result is None:
        return None
    return message_to_dict(result)


async def scenario(ops):
    store = await open_store()  # the suite's backend
    try:
        repo = store.scoped("prop").tasks
        memory_ids, store_ids = itertools.count(), itertools.count()
        with frozen_world(memory_ids):
            memory = Task(id="T")
            memory.add_task_config(CONFIG)
        await repo.create(task_id="T")
        with frozen_world(store_ids):
            await repo.add_task_config("T", CONFIG)
        outcomes = []
        for step, op in enumerate(ops):
            with frozen_world(memory_ids):
                left = await apply(op, step, memory, False, "T")
            with frozen_world(store_ids):
                right = await apply(op, step, repo, True, "T")
            outcomes.append((op, left, right))
            assert left == right, outcomes
        stored = await repo.messages("T")
        assert [message_to_dict(m) for m in stored] == [message_to_dict(m) for m in memory.messages]
        await assert_header(store.database, "prop/T", await repo.header("T"), memory.header)
        current = await repo.current_task_messages("T")
        assert [m.id for m in current] == [m.id for m in memory.current_task_messages()]
        assert await repo.find_current_task_boundaries("T") == memory.find_current_task_boundaries()
        assert await repo.sub_task_spans("T") == sub_task_spans(memory.messages)
        for span in sub_task_spans(memory.messages):
            assert await repo.task_boundaries("T", span.entry_id) == level_boundaries(
                memory.messages, span.entry_id
            )
            assert [m.id for m in await repo.level_messages("T", span.entry_id)] == [
                m.id for m in memory.messages
                if (m.id == span.entry_id) or (m.scope == span.entry_id and m.role != "taskentry")
            ]  # fmt: skip
    finally:
        await close_store(store)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_store_and_memory_agree_after_random_verbs(ops):
    asyncio.run(scenario(ops))


def test_sibling_sub_tasks_example():
    asyncio.run(
        scenario([("enter", False), ("human", "a"), ("exit",), ("enter", True), ("human", "b"),
                  ("enter", False), ("exit",), ("assistant",), ("call", "delegate"),
                  ("enter", False), ("exit",), ("exit",)])
    )  # fmt: skip
