"""Round trips of every format, as properties over valid payloads and mindstore conversations.

* `to_x(from_x(p)) == p` for every drawn payload `p` of format x;
* an import is typed: calls are `ToolCallPart`s the planner tracks (open until answered),
  every result is named after its call, answered calls are marked answered;
* `from_x(to_x(m))` keeps what the format carries (calls, results, texts; ids, usage and
  `terminate` for the two framework formats), and exporting it again gives the same payload;
* a provider export carries no bookkeeping: no task config, no hidden informational
  message, no `terminate` flag, no result metadata.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from format_strategies import (
    agent_graph_payloads,
    anthropic_payloads,
    conversations,
    gemini_payloads,
    message_layer_payloads,
    openai_chat_payloads,
    responses_payloads,
)
from mindstore import formats
from mindstore.formats.conversation import result_text
from mindstore.formats.outgoing import NO_OUTPUT
from mindstore.model.header import TaskHeader
from mindstore.model.messages import AssistantMessage, InformationalMessage, ToolMessage
from mindstore.model.parts import InformationalPart, TextPart, ToolCallPart, ToolResultPart
from mindstore.model.plans import plan_add_messages

FORMATS: dict[str, tuple[Callable[..., Any], Callable[..., Any], Any]] = {
    "openai_chat": (formats.to_openai_chat, formats.from_openai_chat, openai_chat_payloads()),
    "responses": (formats.to_responses, formats.from_responses, responses_payloads()),
    "anthropic": (formats.to_anthropic, formats.from_anthropic, anthropic_payloads()),
    "gemini": (formats.to_gemini, formats.from_gemini, gemini_payloads()),
    "message_layer": (
        formats.to_message_layer,
        formats.from_message_layer,
        message_layer_payloads(),
    ),
    "agent_graph": (formats.to_agent_graph, formats.from_agent_graph, agent_graph_payloads()),
}
PROVIDERS = ("openai_chat", "responses", "anthropic", "gemini")
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def calls(messages: list[Any]) -> list[tuple[str, str, Any]]:
    return [(p.tool_call_id, p.tool_name, p.args)
            for m in messages if isinstance(m, AssistantMessage)
            for p in m.content if isinstance(p, ToolCallPart)]  # fmt: skip


def results(messages: list[Any]) -> list[ToolResultPart]:
    return [
        p
        for m in messages
        if isinstance(m, ToolMessage)
        for p in m.content
        if isinstance(p, ToolResultPart)
    ]


def texts(messages: list[Any], kind: type, sent: Callable[[str], bool] = bool) -> str:
    return "".join(p.text for m in messages if isinstance(m, kind) for p in m.content
                   if isinstance(p, TextPart) and sent(p.text))  # fmt: skip


SENT: dict[str, Callable[[str], bool]] = {"anthropic": str.strip, "gemini": bool}
"""What text each format sends (Anthropic refuses blank text, Gemini empty text: left out)."""


@pytest.mark.parametrize("name", FORMATS)
@SETTINGS
@given(data=st.data())
def test_canonical_payload_round_trips(name: str, data: st.DataObject) -> None:
    to_x, from_x, payloads = FORMATS[name]
    payload = data.draw(payloads)
    assert to_x(from_x(payload)) == payload


@pytest.mark.parametrize("name", FORMATS)
@SETTINGS
@given(data=st.data())
def test_imports_are_typed_and_calls_are_tracked(name: str, data: st.DataObject) -> None:
    _, from_x, payloads = FORMATS[name]
    messages = from_x(data.draw(payloads))
    issued = {call_id: tool for call_id, tool, _ in calls(messages)}
    answered = {part.tool_call_id for part in results(messages)}
    header = plan_add_messages(TaskHeader(), "task-1", messages).header
    assert {ref.id for ref in header.open_tool_calls} == set(issued) - answered
    for part in results(messages):
        assert part.tool_name == issued[part.tool_call_id]
    for message in messages:
        for part in message.content:
            if isinstance(part, ToolCallPart):
                assert part.is_loading is (part.tool_call_id not in answered)
    assert all(not isinstance(m, AssistantMessage) or m.status != "loading" for m in messages)


@pytest.mark.parametrize("name", FORMATS)
@SETTINGS
@given(conversation=conversations())
def test_export_keeps_what_the_format_carries(name: str, conversation: list[Any]) -> None:
    to_x, from_x, _ = FORMATS[name]
    payload = to_x(conversation)
    back = from_x(payload)
    assert to_x(back) == payload
    assert calls(back) == calls(conversation)
    assert [p.tool_call_id for p in results(back)] == [
        p.tool_call_id for p in results(conversation)
    ]
    sent = SENT.get(name, lambda text: True)
    assert texts(back, AssistantMessage) == texts(conversation, AssistantMessage, sent)
    if name != "gemini":  # Gemini carries a result as an object: text comes back wrapped
        expected = [(text if sent(text) else NO_OUTPUT if part.is_error else "")
                    for part in results(conversation) for text in [result_text(part)]]  # fmt: skip
        assert [result_text(p) for p in results(back)] == expected
    if name in ("message_layer", "agent_graph"):
        kept = [
            m.id
            for m in conversation
            if not isinstance(m, InformationalMessage) and m.role != "taskconfig"
        ]
        assert [m.id for m in back] == kept
    if name == "message_layer":
        assert [p.terminate for p in results(back)] == [p.terminate for p in results(conversation)]
        assert [p.metadata for p in results(back)] == [p.metadata for p in results(conversation)]


@pytest.mark.parametrize("name", PROVIDERS)
@SETTINGS
@given(conversation=conversations())
def test_provider_exports_carry_no_bookkeeping(name: str, conversation: list[Any]) -> None:
    to_x = FORMATS[name][0]
    sent = json.dumps(to_x(conversation), ensure_ascii=False)
    assert "terminate" not in sent and "audit" not in sent  # flags and result metadata stay
    assert to_x(conversation) == to_x(conversation[1:])  # the task config (first) adds nothing
    assert "hidden note" not in sent
    visible = any(
        isinstance(m, InformationalMessage) and m.content[0].is_visible_ai for m in conversation
    )
    assert ("visible note" in sent) is visible


def test_informational_messages_only_reach_the_model_when_visible() -> None:
    note = InformationalMessage(
        content=[InformationalPart(is_visible_ai=True, details="tool budget: 3 calls left")]
    )
    hidden = InformationalMessage(
        content=[InformationalPart(is_visible_ai=False, details="ui only")]
    )
    chat = formats.to_openai_chat([note, hidden])
    assert chat == [{"role": "user", "content": "tool budget: 3 calls left"}]
