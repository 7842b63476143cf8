"""Formats end to end: provider conversations imported into the store, and windows sent back.

An imported conversation is a real one: its tool calls are tracked open until answered
(the header's `open_tool_calls`), counted by analytics, its usage is rolled up into the
header, ids are kept, and reading it back and exporting gives the payload that came in.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mindstore import TenantStore, formats
from mindstore.model.messages import AssistantMessage, ToolMessage
from mindstore.model.parts import TaskConfigPart, ToolCallPart, ToolResultPart
from test_formats_roundtrip import FORMATS

CONFIG = TaskConfigPart(model_name="openai/gpt-4o")

CHAT = [
    {"role": "system", "content": "You plan trips."},
    {"role": "user", "content": "Weather in Oslo and Rome?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_oslo",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city":"Oslo"}'},
            },
            {
                "id": "call_rome",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city":"Rome"}'},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "call_oslo", "content": "-3C"},
    {"role": "tool", "tool_call_id": "call_rome", "content": "14C"},
    {"role": "assistant", "content": "Pack a coat for Oslo."},
]

LAYER = [
    {
        "role": "user",
        "contents": [{"type": "text", "content": "stop the job"}],
        "id": "m1",
        "timestamp": 1700000000,
    },
    {
        "role": "assistant",
        "contents": [
            {"type": "tool_call", "id": "c1", "name": "stop_job", "kind": None, "args": {"id": 7}}
        ],
        "id": "m2",
        "timestamp": 1700000001,
        "stop_reason": "toolUse",
        "error": "",
        "usage": {
            "input_tokens": 120,
            "output_tokens": 30,
            "cache_read_tokens": 100,
            "cache_write_tokens": 0,
            "cost": {
                "input": 0.001,
                "output": 0.002,
                "cache_read": 0.0,
                "cache_write": 0.0,
                "total": 0.003,
            },
        },
    },
    {
        "role": "tool",
        "contents": [
            {
                "type": "tool_result",
                "id": "c1",
                "content": "stopped",
                "is_error": False,
                "metadata": {"by": "hook"},
                "terminate": True,
            }
        ],
        "id": "m3",
        "timestamp": 1700000002,
    },
]


async def imported(acme: TenantStore, messages: list[Any]) -> str:
    task_id = (await acme.tasks.create(config=CONFIG)).id
    await acme.tasks.add_messages(task_id, messages)
    return task_id


async def test_openai_chat_conversation_is_tracked_counted_and_sent_back(acme: TenantStore) -> None:
    task_id = await imported(acme, formats.from_openai_chat(CHAT))
    header = await acme.tasks.header(task_id)
    assert header.open_tool_calls == []
    rows = await acme.analytics.tools()
    assert [(row.tool, row.calls, row.results, row.errors) for row in rows] == [
        ("weather", 2, 2, 0)
    ]
    window = await acme.tasks.context(task_id)
    assert window.to_openai_chat() == CHAT  # the task config stays behind
    assert formats.to_openai_chat(await acme.tasks.messages(task_id)) == CHAT


async def test_usage_rolls_up_and_terminate_stays_in_the_store(acme: TenantStore) -> None:
    task_id = await imported(acme, formats.from_message_layer(LAYER))
    header = await acme.tasks.header(task_id)
    assert header.open_tool_calls == []
    assert (header.usage.tokens_in, header.usage.tokens_out, header.usage.cache_reads) == (
        120,
        30,
        100,
    )
    assert header.usage.cost == pytest.approx(0.003)
    (usage,) = await acme.analytics.usage(group_by=())
    assert (usage.tokens_in, usage.tokens_out) == (120, 30)
    stored = await acme.tasks.messages(task_id)
    result = next(
        p
        for m in stored
        if isinstance(m, ToolMessage)
        for p in m.content
        if isinstance(p, ToolResultPart)
    )
    assert result.terminate is True and result.metadata == {"by": "hook"}
    assert formats.to_message_layer(stored) == LAYER
    window = await acme.tasks.context(task_id)
    for payload in (
        window.to_openai_chat(),
        window.to_responses(),
        window.to_anthropic(),
        window.to_gemini(),
    ):
        assert "terminate" not in repr(payload) and "hook" not in repr(payload)
    assert window.to_openai_chat()[-1] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "stopped",
    }


async def test_an_imported_open_call_is_answered_by_the_store(acme: TenantStore) -> None:
    body = {
        "messages": [
            {"role": "user", "content": "Delete tmp?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Deleting."},
                    {
                        "type": "tool_use",
                        "id": "toolu_9",
                        "name": "rm",
                        "input": {"path": "/tmp/x"},
                    },
                ],
            },
        ]
    }
    task_id = await imported(acme, formats.from_anthropic(body))
    assert [ref.id for ref in (await acme.tasks.header(task_id)).open_tool_calls] == ["toolu_9"]
    await acme.tasks.answer_tool_call(task_id, "toolu_9", "removed")
    assert (await acme.tasks.header(task_id)).open_tool_calls == []
    stored = await acme.tasks.messages(task_id)
    call = next(
        p
        for m in stored
        if isinstance(m, AssistantMessage)
        for p in m.content
        if isinstance(p, ToolCallPart)
    )
    assert not call.is_loading and not call.is_approval_pending
    sent = formats.to_anthropic(stored)
    assert sent["messages"][:2] == body["messages"]
    assert sent["messages"][2] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "removed"}],
    }


async def test_agent_graph_ids_are_kept(acme: TenantStore) -> None:
    graph = [
        {"message_id": 41, "role": "user", "content": [{"type": "text", "text": "hi"}]},
        {
            "message_id": "a-1",
            "role": "assistant",
            "content": [
                {"type": "reasoning", "summary": "greet"},
                {"type": "text", "text": "hello"},
            ],
            "usages": {"completion_tokens": 2, "prompt_tokens": 5, "total_tokens": 7},
        },
    ]
    task_id = await imported(acme, formats.from_agent_graph(graph))
    assert (await acme.tasks.get_message(task_id, "41")) is not None
    assert (await acme.tasks.header(task_id)).usage.tokens_in == 5
    assert formats.to_agent_graph(await acme.tasks.messages(task_id)) == graph


@pytest.mark.parametrize("name", FORMATS)
@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
async def test_payload_survives_the_store(
    acme: TenantStore, name: str, data: st.DataObject
) -> None:
    to_x, from_x, payloads = FORMATS[name]
    payload = data.draw(payloads)
    messages = from_x(payload)
    issued = {p.tool_call_id for m in messages if isinstance(m, AssistantMessage) for p in m.content
              if isinstance(p, ToolCallPart)}  # fmt: skip
    answered = {p.tool_call_id for m in messages if isinstance(m, ToolMessage) for p in m.content
                if isinstance(p, ToolResultPart)}  # fmt: skip
    task_id = await imported(acme, messages)
    header = await acme.tasks.header(task_id)
    assert {ref.id for ref in header.open_tool_calls} == issued - answered
    expected_in = sum(m.usage.input_tokens for m in messages if m.usage is not None)
    assert header.usage.tokens_in == expected_in
    assert to_x(await acme.tasks.messages(task_id)) == payload
