"""Redacted and empty turns make valid provider requests (docs/formats.md, "Redacted and
empty turns").

The SDK types (tests/test_formats_sdk.py) check the shape of a request, not the rules the
APIs enforce on top of it: Anthropic refuses empty content, a blank text block ("text
content blocks must be non-empty" / "must contain non-whitespace text") and an error
tool result without content; Gemini refuses an empty text part and a content without
parts; every API refuses a tool result that does not follow its call. `api_rules` checks
those rules, and every export of a conversation with redacted and empty messages must pass
both it and the SDK types.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from format_strategies import conversations
from mindstore import formats
from mindstore.formats.outgoing import NO_OUTPUT, REDACTED
from mindstore.model.header import TaskHeader
from mindstore.model.messages import (
    AssistantMessage,
    InformationalMessage,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from mindstore.model.parts import ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from mindstore.model.plans import plan_add_messages
from mindstore.model.plans.redaction import plan_redact, redaction_of
from test_formats_sdk import anthropic_check, gemini_check, openai_chat_check, responses_check

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
EXPORTS: dict[str, Callable[[list[Any]], Any]] = {
    "openai_chat": formats.to_openai_chat,
    "responses": formats.to_responses,
    "anthropic": formats.to_anthropic,
    "gemini": formats.to_gemini,
}
SDK = {"openai_chat": openai_chat_check, "responses": responses_check,
       "anthropic": anthropic_check, "gemini": gemini_check}  # fmt: skip
REDACTABLE = (SystemMessage, UserMessage, AssistantMessage, ToolMessage, InformationalMessage)


class Refused(AssertionError):
    """A request the provider's API would refuse."""


# ----------------------------------------------------------------------------- API rules


def _anthropic_rules(payload: dict[str, Any]) -> None:
    def blank(block: Any) -> bool:
        return block.get("type") == "text" and not block["text"].strip()

    system = payload.get("system")
    if system is not None and (
        system == []
        or (isinstance(system, str) and not system.strip())
        or (isinstance(system, list) and any(map(blank, system)))
    ):
        raise Refused(f"system: empty or blank text: {system!r}")
    previous: dict[str, Any] | None = None
    for index, turn in enumerate(payload["messages"]):
        content = turn["content"]
        if isinstance(content, str):
            if not content.strip():
                raise Refused(f"messages.{index}: empty content")
            blocks = [{"type": "text", "text": content}]
        else:
            blocks = content
        if not blocks:
            raise Refused(f"messages.{index}: empty content")
        for block in blocks:
            if blank(block):
                raise Refused(f"messages.{index}: text content blocks must be non-empty")
            if block["type"] == "tool_result":
                result = block.get("content", "")
                if block.get("is_error") and result in ("", []):
                    raise Refused(f"messages.{index}: empty content on an error tool_result")
                if isinstance(result, list) and any(map(blank, result)):
                    raise Refused(f"messages.{index}: blank text in a tool_result")
        calls = [b["id"] for b in (previous or {}).get("blocks", []) if b["type"] == "tool_use"]
        results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
        if not set(results) <= set(calls) or (turn["role"] == "user" and calls and
                                              set(calls) - set(results)):  # fmt: skip
            raise Refused(
                f"messages.{index}: tool_result blocks must answer the tool_use "
                f"blocks of the turn right before ({calls} / {results})"
            )
        previous = {"role": turn["role"], "blocks": blocks}


def _gemini_rules(payload: dict[str, Any]) -> None:
    contents = list(payload["contents"])
    if "system_instruction" in payload:
        contents.append(payload["system_instruction"])
    calls: list[str] = []
    for index, content in enumerate(contents):
        if not content.get("parts"):
            raise Refused(f"contents[{index}]: a content needs parts")
        for part in content["parts"]:
            if part.get("text") == "":
                raise Refused(f"contents[{index}]: empty text part")
            if "functionCall" in part:
                calls.append(part["functionCall"]["id"])
            if "functionResponse" in part and part["functionResponse"]["id"] not in calls:
                raise Refused(f"contents[{index}]: a response to no call")


def _openai_chat_rules(payload: list[dict[str, Any]]) -> None:
    calls: set[str] = set()
    for index, message in enumerate(payload):
        if message["role"] == "assistant":
            if message.get("content") in (None, []) and not message.get("tool_calls"):
                raise Refused(f"messages[{index}]: an assistant message needs content or calls")
            calls = {call["id"] for call in message.get("tool_calls", [])}
        elif message["role"] == "tool":
            if message["tool_call_id"] not in calls:
                raise Refused(f"messages[{index}]: a tool message must follow its call")
        elif message["role"] in ("user", "system") and message["content"] in ([], ""):
            raise Refused(f"messages[{index}]: empty content")


def _responses_rules(payload: list[dict[str, Any]]) -> None:
    calls: set[str] = set()
    for index, item in enumerate(payload):
        if item.get("type") == "function_call":
            calls.add(item["call_id"])
        elif item.get("type") == "function_call_output" and item["call_id"] not in calls:
            raise Refused(f"input[{index}]: an output for no call")
        elif item.get("type") == "message" and item["content"] in ([], ""):
            raise Refused(f"input[{index}]: empty content")


API_RULES: dict[str, Callable[[Any], None]] = {
    "openai_chat": _openai_chat_rules,
    "responses": _responses_rules,
    "anthropic": _anthropic_rules,
    "gemini": _gemini_rules,
}


def alternates(name: str, payload: Any) -> bool:
    """Anthropic and Gemini exports of stored messages alternate sides, turn by turn."""
    turns = payload["messages"] if name == "anthropic" else payload["contents"]
    roles = [turn["role"] for turn in turns]
    return all(a != b for a, b in itertools.pairwise(roles))


# ----------------------------------------------------------------------------- redacting


def redacted(conversation: list[Any], index: int, part_index: int | None = None) -> list[Any]:
    """The conversation with one message redacted exactly as `tasks.redact` stores it."""
    header = plan_add_messages(TaskHeader(), "task-1", conversation).header
    plan = plan_redact(header, "task-1", index, conversation[index], "test", part_index)
    return [*conversation[:index], plan.result, *conversation[index + 1 :]]


@st.composite
def redacted_conversations(draw: Any) -> list[Any]:
    """A conversation with some messages redacted (whole or one part) and some empty
    user and assistant messages (no text: a turn that produced nothing) among them."""
    conversation = draw(conversations())
    for index in range(len(conversation)):
        message = conversation[index]
        if isinstance(message, REDACTABLE) and message.content and draw(st.booleans()):
            part = draw(st.one_of(st.none(), st.integers(0, len(message.content) - 1)))
            conversation = redacted(conversation, index, part)
    for _ in range(draw(st.integers(0, 2))):
        cls = draw(st.sampled_from([UserMessage, AssistantMessage]))
        blank = draw(st.sampled_from(["", " ", "\n"]))
        empty = cls(content=[TextPart(text=blank)]) if draw(st.booleans()) else cls(content=[])
        if cls is AssistantMessage and draw(st.booleans()):
            empty.content.append(ReasoningPart(reasoning="unsigned"))  # nothing Anthropic takes
        # anywhere but between a call and its results
        spots = [
            i
            for i in range(1, len(conversation) + 1)
            if not isinstance(conversation[i] if i < len(conversation) else None, ToolMessage)
        ]
        conversation.insert(draw(st.sampled_from(spots)), empty)
    return conversation


@pytest.mark.parametrize("name", EXPORTS)
@SETTINGS
@given(conversation=redacted_conversations())
def test_redacted_and_empty_turns_make_valid_requests(name: str, conversation: list[Any]) -> None:
    payload = EXPORTS[name](conversation)
    SDK[name]()(payload)
    API_RULES[name](payload)
    if name in ("anthropic", "gemini"):
        assert alternates(name, payload)
    calls = [p.tool_call_id for m in conversation if isinstance(m, AssistantMessage)
             for p in m.content if isinstance(p, ToolCallPart)]  # fmt: skip
    sent = json.dumps(payload, ensure_ascii=False)
    assert all(call in sent for call in calls)  # redaction keeps every call and its result
    results = [p for m in conversation if isinstance(m, ToolMessage) for p in m.content
               if isinstance(p, ToolResultPart) and redaction_of(m)]  # fmt: skip
    if results:
        assert REDACTED in sent  # a redacted result says so


def test_the_api_rules_do_refuse_what_the_apis_refuse() -> None:
    """The checks above can fail, on the requests the findings sent."""
    refused = [
        ("anthropic", {"messages": [{"role": "user", "content": ""}]}),
        ("anthropic", {"messages": [{"role": "user", "content": [{"type": "text", "text": " "}]}]}),
        ("anthropic", {"messages": [{"role": "user", "content": []}]}),
        ("anthropic", {"messages": [
            {"role": "assistant",
             "content": [{"type": "tool_use", "id": "c", "name": "f", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c", "content": "",
                                          "is_error": True}]}]}),
        ("anthropic", {"messages": [
            {"role": "assistant",
             "content": [{"type": "tool_use", "id": "c", "name": "f", "input": {}}]},
            {"role": "user", "content": "hi"}]}),
        ("gemini", {"contents": [{"role": "user", "parts": [{"text": ""}]}]}),
        ("gemini", {"contents": [{"role": "user", "parts": []}]}),
        ("openai_chat", [{"role": "tool", "tool_call_id": "c", "content": "x"}]),
        ("openai_chat", [{"role": "user", "content": ""}]),
        ("responses", [{"type": "message", "role": "user", "content": ""}]),
        ("responses", [{"type": "function_call_output", "call_id": "c", "output": "x"}]),
    ]  # fmt: skip
    for name, payload in refused:
        with pytest.raises(Refused):
            API_RULES[name](payload)
    assert not alternates("anthropic", {"messages": [{"role": "user"}, {"role": "user"}]})


# ----------------------------------------------------------------------------- exact forms


def _chat() -> list[Any]:
    return [
        SystemMessage(id="s", content=[TextPart(text="Be brief.")]),
        UserMessage(id="u1", content=[TextPart(text="My SSN is 123-45-6789")]),
        AssistantMessage(id="a1", status="completed", content=[
            TextPart(text="Looking it up"),
            ToolCallPart(tool_call_id="c1", tool_name="lookup", args={"ssn": "123-45-6789"})]),
        ToolMessage(id="t1", content=[ToolResultPart(tool_call_id="c1", tool_name="lookup",
                                                     result="found 123-45-6789")]),
        AssistantMessage(id="a2", status="completed", content=[TextPart(text="Done.")]),
    ]  # fmt: skip


def _all_redacted(conversation: list[Any], *ids: str) -> list[Any]:
    for message_id in ids:
        index = next(i for i, m in enumerate(conversation) if m.id == message_id)
        conversation = redacted(conversation, index)
    return conversation


def test_a_redacted_user_message_is_a_placeholder_for_every_provider() -> None:
    chat = _all_redacted(_chat(), "u1")
    assert formats.to_openai_chat(chat)[1] == {"role": "user", "content": REDACTED}
    assert formats.to_responses(chat)[1] == {"type": "message", "role": "user", "content": REDACTED}
    assert formats.to_anthropic(chat)["messages"][0] == {"role": "user", "content": REDACTED}
    assert formats.to_gemini(chat)["contents"][0] == {"role": "user", "parts": [{"text": REDACTED}]}


def test_a_redacted_call_and_result_keep_their_pairing_and_lose_their_content() -> None:
    chat = _all_redacted(_chat(), "u1", "a1", "t1")
    anthropic = formats.to_anthropic(chat)
    assert anthropic["messages"][1:3] == [
        {"role": "assistant", "content": [{"type": "text", "text": REDACTED},
                                          {"type": "tool_use", "id": "c1", "name": "lookup",
                                           "input": {}}]},
        {"role": "user",
         "content": [{"type": "tool_result", "tool_use_id": "c1", "content": REDACTED}]},
    ]  # fmt: skip
    assert formats.to_openai_chat(chat)[3] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": REDACTED,
    }
    gemini = formats.to_gemini(chat)["contents"]
    assert gemini[2] == {"role": "user", "parts": [{"functionResponse": {
        "name": "lookup", "response": {"result": REDACTED}, "id": "c1"}}]}  # fmt: skip
    for name, export in EXPORTS.items():
        sent = json.dumps(export(chat))
        assert "123-45-6789" not in sent, name
        API_RULES[name](export(chat))


def test_one_redacted_part_keeps_the_rest_of_the_message() -> None:
    chat = _chat()
    chat[1].content.append(TextPart(text="and my name is Ann"))
    chat = redacted(chat, 1, part_index=0)
    assert formats.to_anthropic(chat)["messages"][0] == {"role": "user", "content": [
        {"type": "text", "text": REDACTED},
        {"type": "text", "text": "and my name is Ann"}]}  # fmt: skip


def test_a_turn_left_out_lets_its_neighbours_merge_for_anthropic_and_gemini() -> None:
    """An empty user message between two answers, and an assistant message holding only
    unsigned reasoning between two questions, are left out: the turns around them merge
    (Anthropic would combine them anyway; the export sends them alternating)."""
    chat = [
        UserMessage(id="u1", content=[TextPart(text="Hi")]),
        AssistantMessage(id="a1", status="completed", content=[TextPart(text="Hello.")]),
        UserMessage(id="u2", content=[TextPart(text="  ")]),
        AssistantMessage(id="a2", status="completed", content=[TextPart(text="Anything else?")]),
        UserMessage(id="u3", content=[TextPart(text="Yes")]),
        AssistantMessage(id="a3", status="completed", content=[ReasoningPart(reasoning="hmm")]),
        UserMessage(id="u4", content=[TextPart(text="Well?")]),
    ]
    assert formats.to_anthropic(chat)["messages"] == [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": [{"type": "text", "text": "Hello."},
                                          {"type": "text", "text": "Anything else?"}]},
        {"role": "user", "content": [{"type": "text", "text": "Yes"},
                                     {"type": "text", "text": "Well?"}]},
    ]  # fmt: skip
    chat[2] = UserMessage(id="u2", content=[TextPart(text="")])  # Gemini refuses only ""
    contents = formats.to_gemini(chat)["contents"]
    assert [c["role"] for c in contents] == [
        "user",
        "model",
        "user",
        "model",
        "user",
    ]  # reasoning is sent
    assert contents[1]["parts"] == [{"text": "Hello."}, {"text": "Anything else?"}]
    # the OpenAI exports leave the empty turn out too (they need no alternation)
    assert [m["content"] for m in formats.to_openai_chat(chat)] == [
        "Hi",
        "Hello.",
        "Anything else?",
        "Yes",
        "Well?",
    ]


def test_an_empty_turn_is_left_out_of_the_openai_exports_checked_by_the_sdk_types() -> None:
    """An empty user turn, an empty system text and an assistant turn whose only text is
    empty beside its call: the OpenAI exports send none of the empty texts (the call stays,
    content null), and the requests pass the SDK's own types."""
    chat = [
        SystemMessage(id="s", content=[TextPart(text="")]),
        UserMessage(id="u1", content=[TextPart(text="Hi")]),
        AssistantMessage(id="a1", status="completed", content=[
            TextPart(text=""), ToolCallPart(tool_call_id="c1", tool_name="lookup", args={})]),
        ToolMessage(id="t1", content=[
            ToolResultPart(tool_call_id="c1", tool_name="lookup", result="ok")]),
        UserMessage(id="u2", content=[TextPart(text="")]),
        UserMessage(id="u3", content=[TextPart(text=" ")]),  # whitespace is content for OpenAI
    ]  # fmt: skip
    chat_payload = formats.to_openai_chat(chat)
    openai_chat_check()(chat_payload)
    assert chat_payload == [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {"role": "user", "content": " "},
    ]  # fmt: skip
    responses_payload = formats.to_responses(chat)
    responses_check()(responses_payload)
    assert [item.get("content") for item in responses_payload if item.get("type") == "message"] == [
        "Hi",
        " ",
    ]
    for name in ("openai_chat", "responses"):
        API_RULES[name](EXPORTS[name](chat))


def test_an_error_result_without_text_is_not_empty_for_anthropic() -> None:
    chat = [*_chat()[:3], ToolMessage(id="t1", content=[ToolResultPart(
        tool_call_id="c1", tool_name="lookup", result="", is_error=True)])]  # fmt: skip
    block = formats.to_anthropic(chat)["messages"][-1]["content"][0]
    assert block == {
        "type": "tool_result",
        "tool_use_id": "c1",
        "content": NO_OUTPUT,
        "is_error": True,
    }


def test_a_redacted_import_is_sent_canonically_and_an_intact_one_as_imported() -> None:
    payload = {"messages": [
        {"role": "user", "content": [{"type": "text", "text": "secret",
                                      "cache_control": {"type": "ephemeral"}},
                                     {"type": "text", "text": "keep"}]},
        {"role": "assistant", "content": "ok"},
    ]}  # fmt: skip
    imported = formats.from_anthropic(payload)
    assert formats.to_anthropic(imported) == payload
    chat = redacted(imported, 0, part_index=0)
    assert formats.to_anthropic(chat)["messages"][0] == {"role": "user", "content": [
        {"type": "text", "text": REDACTED}, {"type": "text", "text": "keep"}]}  # fmt: skip


async def test_a_message_redacted_in_the_store_exports_valid_requests(store: Any) -> None:
    acme = store.scoped("acme")
    task = await acme.tasks.create()
    await acme.tasks.add_messages(task.id, _chat())
    for message_id in ("s", "u1", "a1", "t1"):
        await acme.tasks.redact(task.id, message_id, reason="request")
    stored = await acme.tasks.messages(task.id)
    for name, export in EXPORTS.items():
        payload = export(stored)
        SDK[name]()(payload)
        API_RULES[name](payload)
        assert "123-45-6789" not in json.dumps(payload), name
    assert formats.to_anthropic(stored)["system"] == REDACTED
