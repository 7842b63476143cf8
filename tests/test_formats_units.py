"""Each format on worked examples: typed imports, the mapping rules, refusals of bad input."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from format_strategies import PNG, json_values
from mindstore import formats
from mindstore.errors import ValidationError
from mindstore.formats.stash import diff, patch, read_entry, with_entry
from mindstore.model.messages import (
    AssistantMessage,
    InformationalMessage,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from mindstore.model.parts import (
    ImagePart,
    ReasoningPart,
    RedactedThinkingPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)


# ---------------------------------------------------------------- OpenAI Chat Completions
def test_openai_chat_import_is_typed() -> None:
    payload = [
        {"role": "developer", "content": "Answer briefly."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"q":"png"}'},
                },
                {
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": "not json"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "a tiny image"},
    ]
    system, user, assistant, tool = formats.from_openai_chat(payload)
    assert isinstance(system, SystemMessage) and system.text() == "Answer briefly."
    image = user.content[1]
    assert isinstance(image, ImagePart) and image.image == PNG and image.mime_type == "image/png"
    first, second = assistant.tool_calls()
    assert (first.args, first.is_loading) == ({"q": "png"}, False)
    assert (second.args, second.is_loading) == ({}, True)  # unparsable arguments, unanswered
    assert isinstance(tool, ToolMessage) and tool.tool_results()[0].tool_name == "lookup"
    assert formats.to_openai_chat([system, user, assistant, tool]) == payload


def test_openai_chat_tool_message_with_several_results_and_user_content() -> None:
    message = ToolMessage(
        content=[
            ToolResultPart(tool_call_id="c1", tool_name="t", result={"rows": 2}),
            ToolResultPart(
                tool_call_id="c2", tool_name="t", result="", is_error=True, error="timeout"
            ),
            TextPart(text="also consider this"),
        ]
    )
    assert formats.to_openai_chat([message]) == [
        {"role": "tool", "tool_call_id": "c1", "content": '{"rows": 2}'},
        {"role": "tool", "tool_call_id": "c2", "content": "timeout"},
        {"role": "user", "content": [{"type": "text", "text": "also consider this"}]},
    ]


def test_a_store_edit_wins_over_the_stash() -> None:
    payload = [{"role": "user", "content": [{"type": "text", "text": "old", "cache_hint": 1}]}]
    (message,) = formats.from_openai_chat(payload)
    message.content[0].text = "new"
    # the list spelling and the unmodelled key survive, the stale text does not
    assert formats.to_openai_chat([message]) == [
        {"role": "user", "content": [{"type": "text", "text": "new"}]}
    ]
    message.content[0].text = "old"
    assert formats.to_openai_chat([message]) == payload


# ---------------------------------------------------------------- OpenAI Responses
def test_responses_items_of_one_turn_are_one_assistant_message() -> None:
    items = [
        {"role": "user", "content": "weather?"},
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "need a tool"}],
            "encrypted_content": "gAAAA",
        },
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "weather",
            "arguments": '{"city":"Oslo"}',
        },
        {
            "type": "function_call_output",
            "call_id": "call_1",
            "output": [{"type": "input_text", "text": "-3C"}],
        },
        {
            "type": "message",
            "role": "assistant",
            "id": "msg_2",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Cold.", "annotations": []}],
        },
    ]
    user, turn, tool, answer = formats.from_responses(items)
    assert turn.id == "rs_1" and answer.id == "msg_2"
    reasoning, call = turn.content
    assert isinstance(reasoning, ReasoningPart) and reasoning.signature == "gAAAA"
    assert isinstance(call, ToolCallPart) and call.args == {"city": "Oslo"} and not call.is_loading
    assert tool.tool_results()[0].tool_result_contents[0].text == "-3C"
    assert formats.to_responses([user, turn, tool, answer]) == items


def test_responses_leaves_out_reasoning_it_cannot_send_back() -> None:
    turn = AssistantMessage(
        content=[
            ReasoningPart(reasoning="hm", signature="anthropic-sig"),
            TextPart(text="Hi"),
            TextPart(text=" there"),
        ]
    )
    assert formats.to_responses([turn]) == [
        {"type": "message", "role": "assistant", "content": "Hi there"}
    ]


# ---------------------------------------------------------------- Anthropic
def test_anthropic_thinking_and_results() -> None:
    payload = {
        "system": "You are terse.",
        "messages": [
            {"role": "user", "content": "List files"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "use ls", "signature": "EqQB"},
                    {"type": "redacted_thinking", "data": "EmwK"},
                    {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {"path": "/"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": "permission denied",
                        "is_error": True,
                    },
                    {"type": "text", "text": "try /tmp"},
                ],
            },
        ],
    }
    system, user, assistant, tool = formats.from_anthropic(payload)
    thinking, redacted, call = assistant.content
    assert (thinking.reasoning, thinking.signature) == ("use ls", "EqQB")
    assert isinstance(redacted, RedactedThinkingPart) and isinstance(call, ToolCallPart)
    result, text = tool.content
    assert (
        isinstance(tool, ToolMessage) and result.is_error and result.result == "permission denied"
    )
    assert result.tool_name == "ls" and text.text == "try /tmp"
    assert formats.to_anthropic([system, user, assistant, tool]) == payload


def test_anthropic_joins_results_into_one_turn_and_drops_unsigned_reasoning() -> None:
    messages = [
        SystemMessage(content=[TextPart(text="a")]),
        UserMessage(content=[TextPart(text="go")]),
        AssistantMessage(
            content=[
                ReasoningPart(reasoning="unsigned"),
                ThinkingPart(content="t", signature="s"),
                ToolCallPart(tool_call_id="c1", tool_name="x"),
                ToolCallPart(tool_call_id="c2", tool_name="y"),
            ]
        ),
        ToolMessage(content=[ToolResultPart(tool_call_id="c1", tool_name="x", result="1")]),
        ToolMessage(content=[ToolResultPart(tool_call_id="c2", tool_name="y", result="2")]),
        SystemMessage(content=[TextPart(text="b")]),
    ]
    body = formats.to_anthropic(messages)
    assert body["system"] == [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    assert [turn["role"] for turn in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": "t",
        "signature": "s",
    }
    assert [block["tool_use_id"] for block in body["messages"][2]["content"]] == ["c1", "c2"]


# ---------------------------------------------------------------- Gemini
def test_gemini_pairs_calls_without_ids_and_keeps_signatures() -> None:
    payload = {
        "contents": [
            {"role": "user", "parts": [{"text": "two lookups"}]},
            {
                "role": "model",
                "parts": [
                    {
                        "function_call": {"name": "find", "args": {"q": 1}},
                        "thoughtSignature": "sig",
                    },
                    {"functionCall": {"name": "find", "args": {"q": 2}}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"name": "find", "response": {"hits": 1}}},
                    {"functionResponse": {"name": "find", "response": {"hits": 2}}},
                ],
            },
        ]
    }
    _, model, tool = formats.from_gemini(payload)
    first, second = model.tool_calls()
    assert [r.tool_call_id for r in tool.tool_results()] == [
        first.tool_call_id,
        second.tool_call_id,
    ]
    assert [r.result for r in tool.tool_results()] == [{"hits": 1}, {"hits": 2}]
    assert (
        formats.to_gemini(formats.from_gemini(payload)) == payload
    )  # snake_case, signature, no ids


def test_gemini_wraps_results_that_are_not_objects() -> None:
    tool = ToolMessage(
        content=[
            ToolResultPart(tool_call_id="c", tool_name="f", result="ok"),
            ToolResultPart(tool_call_id="d", tool_name="f", result="", is_error=True, error="boom"),
        ]
    )
    parts = formats.to_gemini([tool])["contents"][0]["parts"]
    assert [p["functionResponse"]["response"] for p in parts] == [
        {"result": "ok"},
        {"error": "boom"},
    ]


# ---------------------------------------------------------------- the message-layer format
def test_message_layer_contents_and_roles_are_typed() -> None:
    payload = [
        {
            "role": "user",
            "contents": [
                {"type": "text", "content": "hi"},
                {"type": "image", "images": [b"\x89PNG\r\n\x1a\nxyz", "https://e.com/a.png"]},
            ],
            "id": "u1",
            "timestamp": 1700000000.5,
        },
        {
            "role": "assistant",
            "contents": [
                {"type": "thinking", "content": "hm", "signature": "s1"},
                {"type": "tool_call", "id": "c1", "name": "stop", "kind": "other", "args": {}},
            ],
            "id": "a1",
            "timestamp": 1700000001,
            "usage": {
                "input_tokens": 12,
                "output_tokens": 3,
                "cache_read_tokens": 0,
                "cache_write_tokens": 0,
                "cost": {
                    "input": 0.0,
                    "output": 0.0,
                    "cache_read": 0.0,
                    "cache_write": 0.0,
                    "total": 0.01,
                },
            },
            "stop_reason": "error",
            "error": "overloaded",
        },
        {
            "role": "user",
            "contents": [
                {
                    "type": "tool_result",
                    "id": "c1",
                    "content": "stopped",
                    "is_error": False,
                    "metadata": {"hook": "x"},
                    "terminate": True,
                }
            ],
            "id": "t1",
            "timestamp": 1700000002,
        },
        {
            "role": "custom",
            "contents": [{"type": "text", "content": "pinned"}],
            "id": "x1",
            "timestamp": 1700000003,
            "custom_type": "bookmark",
        },
        {
            "role": "compaction_summary",
            "contents": [{"type": "text", "content": "earlier: setup"}],
            "id": "x2",
            "timestamp": 1700000004,
        },
    ]
    user, assistant, tool, custom, summary = formats.from_message_layer(payload)
    assert (
        user.text() == "hi"
        and user.content[1].image.startswith("iVBORw0KGg")
        and user.content[1].mime_type == "image/png"
    )
    assert isinstance(assistant.content[0], ThinkingPart) and assistant.content[0].signature == "s1"
    assert assistant.status == "error" and assistant.error_message == "overloaded"
    assert assistant.usage.input_tokens == 12 and assistant.usage.cost.total == 0.01
    result = tool.tool_results()[0]
    assert isinstance(tool, ToolMessage) and result.terminate and result.metadata == {"hook": "x"}
    assert isinstance(custom, InformationalMessage) and custom.content[0].additional_data == {
        "custom_type": "bookmark"
    }
    assert not custom.content[0].is_visible_ai and summary.content[0].is_visible_ai
    assert formats.to_message_layer([user, assistant, tool, custom, summary]) == payload
    # a summary reaches a model as user text; a custom message does not
    assert formats.to_openai_chat([custom, summary]) == [
        {"role": "user", "content": "earlier: setup"}
    ]


# ---------------------------------------------------------------- the agent-graph format
def test_agent_graph_blocks_ids_and_usage() -> None:
    payload = [
        {
            "message_id": 41,
            "role": "assistant",
            "timestamp": 1700000000.0,
            "content": [
                {"type": "reasoning", "summary": "plan", "details": ["a", "b"]},
                {"type": "remote_tool_call", "id": "ws1", "name": "web_search", "args": {"q": "x"}},
            ],
            "tools_calls": [
                {
                    "id": "call_9",
                    "type": "function",
                    "function": {"name": "calc", "arguments": '{"x": 2}'},
                }
            ],
            "usages": {
                "completion_tokens": 7,
                "prompt_tokens": 30,
                "total_tokens": 37,
                "reasoning_tokens": 4,
                "cache_creation_input_tokens": 1,
                "cache_read_input_tokens": 2,
            },
        },
        {
            "message_id": "r1",
            "role": "tool",
            "content": [{"type": "tool_result", "call_id": "call_9", "output": 4}],
        },
    ]
    assistant, tool = formats.from_agent_graph(payload)
    assert assistant.id == "41" and tool.id == "r1"
    reasoning, remote, derived = assistant.content
    assert isinstance(reasoning, ReasoningPart) and reasoning.reasoning == "plan"
    assert (remote.tool_call_id, remote.kind) == ("ws1", "remote")
    assert (derived.tool_call_id, derived.tool_name, derived.args, derived.is_loading) == (
        "call_9",
        "calc",
        {"x": 2},
        False,
    )
    usage = assistant.usage
    assert (
        usage.input_tokens,
        usage.output_tokens,
        usage.reasoning_tokens,
        usage.cache_write_tokens,
        usage.cache_read_tokens,
    ) == (30, 7, 4, 1, 2)
    assert formats.to_agent_graph([assistant, tool]) == payload


# ---------------------------------------------------------------- refusals
BAD: list[tuple[Callable[[Any], Any], Any, str]] = [
    (formats.from_openai_chat, {"role": "user"}, "messages: expected a list"),
    (formats.from_openai_chat, [{"role": "robot", "content": "x"}], "messages[0].role"),
    (formats.from_openai_chat, [{"role": "tool", "content": "x"}], "messages[0].tool_call_id"),
    (
        formats.from_openai_chat,
        [
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "$x", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            }
        ],
        "messages[0].tool_calls[0].id",
    ),
    (
        formats.from_responses,
        [{"type": "function_call", "name": "f", "arguments": "{}"}],
        "input[0].call_id",
    ),
    (
        formats.from_responses,
        [{"type": "message", "role": "robot", "content": "x"}],
        "input[0].role",
    ),
    (
        formats.from_anthropic,
        {
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "tool_use", "id": "t", "name": "f", "input": [1]}],
                }
            ]
        },
        "messages[0].content[0].input",
    ),
    (
        formats.from_anthropic,
        {"messages": [{"role": "system", "content": "x"}]},
        "messages[0].role",
    ),
    (
        formats.from_anthropic,
        {"messages": [{"role": "user", "content": [{"type": "image", "source": 3}]}]},
        "messages[0].content[0].source",
    ),
    (
        formats.from_gemini,
        {"contents": [{"role": "model", "parts": [{"functionCall": {"args": {}}}]}]},
        "contents[0].parts[0].functionCall.name",
    ),
    (formats.from_gemini, {"contents": [{"role": "assistant", "parts": []}]}, "contents[0].role"),
    (
        formats.from_message_layer,
        [{"role": "user", "contents": [{"type": "image", "images": [object()]}]}],
        "messages[0].contents[0].images[0]",
    ),
    (
        formats.from_message_layer,
        [{"role": "assistant", "contents": [], "usage": {"input_tokens": "many"}}],
        "messages[0].usage",
    ),
    (
        formats.from_message_layer,
        [{"role": "tool", "contents": [{"type": "tool_result", "content": "x"}]}],
        "messages[0].contents[0].id",
    ),
    (
        formats.from_agent_graph,
        [{"role": "user", "message_id": "", "content": []}],
        "messages[0].message_id",
    ),
    (
        formats.from_agent_graph,
        [{"role": "user", "content": [{"type": "image", "media": {"kind": "disk"}}]}],
        "messages[0].content[0].media.kind",
    ),
    (
        formats.from_agent_graph,
        [{"role": "assistant", "content": [], "usages": {"prompt_tokens": 1}}],
        "messages[0].usages.completion_tokens",
    ),
    (
        formats.from_agent_graph,
        [{"role": "user", "content": [], "timestamp": "yesterday"}],
        "messages[0].timestamp",
    ),
]


@pytest.mark.parametrize(
    ("importer", "payload", "where"), BAD, ids=[f"{i}-{b[2]}" for i, b in enumerate(BAD)]
)
def test_malformed_payloads_are_refused_with_their_path(
    importer: Callable[[Any], Any], payload: Any, where: str
) -> None:
    before = copy.deepcopy(payload) if not _has_object(payload) else None
    with pytest.raises(ValidationError) as caught:
        importer(payload)
    assert where in str(caught.value)
    if before is not None:
        assert payload == before  # the caller's payload is never changed


def _has_object(value: Any) -> bool:
    return "object at" in repr(value)


# ---------------------------------------------------------------- the stash itself
dicts = st.dictionaries(st.sampled_from(list("abcdef")), json_values, max_size=5)


@settings(max_examples=200, deadline=None)
@given(original=dicts, canonical=dicts)
def test_patch_turns_the_rendering_back_into_the_original(
    original: dict[str, Any], canonical: dict[str, Any]
) -> None:
    assert patch(canonical, diff(original, canonical)) == original
    assert diff(original, original) == {}


@settings(max_examples=200, deadline=None)
@given(original=dicts, canonical=dicts, edited=json_values)
def test_a_changed_rendering_is_never_overwritten(
    original: dict[str, Any], canonical: dict[str, Any], edited: Any
) -> None:
    delta = diff(original, canonical)
    for key in delta.get("swap", {}):
        changed = dict(canonical, **{key: ["edited in the store", edited]})
        assert patch(changed, delta)[key] == changed[key]


@settings(max_examples=200, deadline=None)
@given(entry=dicts)
def test_an_entry_keeps_every_value_but_the_empty_ones(entry: dict[str, Any]) -> None:
    """0, 0.0 and "" are values (0 == False must not drop them); None, False, {} and [] are
    left out, and an entry with nothing left is no entry."""
    kept = {
        k: v for k, v in entry.items() if v is not None and v is not False and v != {} and v != []
    }
    stored = with_entry({"own": 1}, "fmt", entry)
    assert read_entry(stored, "fmt") == kept
    assert stored == ({"own": 1, "fmt": kept} if kept else {"own": 1})
    assert read_entry(with_entry(None, "fmt", {"index": 0, "score": 0.0, "off": False}), "fmt") == {
        "index": 0,
        "score": 0.0,
    }


def test_messages_with_nothing_a_provider_carries_are_left_out() -> None:
    from mindstore.model.parts import AudioPart

    messages = [
        UserMessage(content=[TextPart(text="hi")]),
        AssistantMessage(content=[ReasoningPart(reasoning="unsigned thoughts")]),
        UserMessage(content=[AudioPart(audio=["file:clip.mp3"])]),
    ]
    assert formats.to_openai_chat(messages) == [{"role": "user", "content": "hi"}]
    assert formats.to_anthropic(messages) == {"messages": [{"role": "user", "content": "hi"}]}
    assert formats.to_responses(messages) == [{"type": "message", "role": "user", "content": "hi"}]
    assert formats.to_gemini(messages)["contents"][0] == {"role": "user", "parts": [{"text": "hi"}]}
