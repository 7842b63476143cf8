"""Hypothesis strategies: valid payloads of each message format, and mindstore conversations.

Every payload strategy builds a conversation turn by turn, so tool results always answer
calls made before them (with unique ids), as a provider or framework would produce it.
Spellings the formats allow in more than one way (a lone text as a string or a list, extra
provider fields, compact or spaced argument JSON, missing defaults) are all drawn, since
the round trip must give each back as it came.
"""

from __future__ import annotations

import base64
import json
import string
from datetime import UTC, datetime
from typing import Any

from hypothesis import strategies as st

from mindstore.model.messages import (
    AssistantMessage,
    InformationalMessage,
    SystemMessage,
    TaskConfigMessage,
    ToolMessage,
    UserMessage,
)
from mindstore.model.parts import (
    ImagePart,
    InformationalPart,
    MediaRef,
    ReasoningPart,
    TaskConfigPart,
    TextPart,
    ToolCallPart,
    ToolResultContent,
    ToolResultPart,
)

ID_CHARS = string.ascii_letters + string.digits + "_-"
PNG = (  # a 1x1 PNG
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8"
    "z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)

MARKERS = ("terminate", "audit", "hidden note", "visible note")
"""Words the export tests look for in what is sent (a flag, result metadata, an
informational note): drawn text never holds them (Hypothesis mixes the test module's
own string constants into the text it draws)."""


def _unmarked(text: str) -> bool:
    return not any(marker in text for marker in MARKERS)


texts = st.text(max_size=24).filter(_unmarked)
filled = st.text(min_size=1, max_size=24).filter(str.strip)
"""Text the Anthropic and Gemini APIs take: not empty, not only whitespace (docs/formats.md)."""
sent = st.text(min_size=1, max_size=24)
"""A turn's text the OpenAI exports send: not empty (whitespace is content; docs/formats.md)."""
names = st.sampled_from(["search", "read_file", "get_weather", "calc"])
json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-1000, 1000), texts)
json_values = st.recursive(
    json_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.text(ID_CHARS, min_size=1, max_size=6), inner, max_size=3),
    ),
    max_leaves=8,
)
args = st.dictionaries(st.text(ID_CHARS, min_size=1, max_size=8), json_values, max_size=3)


class Ids:
    """Unique ids within one drawn conversation."""

    def __init__(self, draw: Any) -> None:
        self.draw = draw
        self.n = 0

    def __call__(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}_{self.draw(st.text(ID_CHARS, max_size=6))}"


def maybe(draw: Any, data: dict[str, Any], key: str, values: st.SearchStrategy[Any]) -> None:
    if draw(st.booleans()):
        data[key] = draw(values)


def arguments(draw: Any, value: dict[str, Any]) -> str:
    spaced = draw(st.booleans())
    return (
        json.dumps(value)
        if spaced
        else json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    )


# ---------------------------------------------------------------- OpenAI Chat Completions
@st.composite
def openai_chat_payloads(draw: Any) -> list[dict[str, Any]]:
    ids = Ids(draw)
    out: list[dict[str, Any]] = []
    if draw(st.booleans()):
        out.append({"role": draw(st.sampled_from(["system", "developer"])), "content": draw(sent)})
    for _ in range(draw(st.integers(1, 3))):
        parts = [{"type": "text", "text": draw(sent)}]
        if draw(st.booleans()):
            url = draw(
                st.sampled_from(["https://example.com/a.png", f"data:image/png;base64,{PNG}"])
            )
            image: dict[str, Any] = {"url": url}
            maybe(draw, image, "detail", st.sampled_from(["low", "high", "auto"]))
            parts.append({"type": "image_url", "image_url": image})
        user: dict[str, Any] = {
            "role": "user",
            "content": parts if len(parts) > 1 or draw(st.booleans()) else parts[0]["text"],
        }
        maybe(draw, user, "name", st.sampled_from(["alice", "bob"]))
        out.append(user)
        calls = [
            {
                "id": ids("call_"),
                "type": "function",
                "function": {"name": draw(names), "arguments": arguments(draw, draw(args))},
            }
            for _ in range(draw(st.integers(0, 3)))
        ]
        assistant: dict[str, Any] = {
            "role": "assistant",
            "content": draw(sent) if not calls or draw(st.booleans()) else None,
        }
        if calls:
            assistant["tool_calls"] = calls
        maybe(draw, assistant, "refusal", st.none())
        out.append(assistant)
        for call in calls:
            content = draw(texts)
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": call["id"],
                    "content": [{"type": "text", "text": content}]
                    if draw(st.booleans())
                    else content,
                }
            )
        if calls:
            out.append({"role": "assistant", "content": draw(sent)})
    return out


# ---------------------------------------------------------------- OpenAI Responses
@st.composite
def responses_payloads(draw: Any) -> list[dict[str, Any]]:
    ids = Ids(draw)
    out: list[dict[str, Any]] = []
    if draw(st.booleans()):
        out.append({"role": draw(st.sampled_from(["system", "developer"])), "content": draw(sent)})
    for _ in range(draw(st.integers(1, 3))):
        content: list[dict[str, Any]] = [{"type": "input_text", "text": draw(sent)}]
        if draw(st.booleans()):
            content.append(
                {
                    "type": "input_image",
                    "image_url": "https://example.com/a.png",
                    "detail": draw(st.sampled_from(["low", "high", "auto"])),
                }
            )
        user: dict[str, Any] = {
            "role": "user",
            "content": content if len(content) > 1 or draw(st.booleans()) else content[0]["text"],
        }
        maybe(draw, user, "type", st.just("message"))
        out.append(user)
        if draw(st.booleans()):
            reasoning: dict[str, Any] = {
                "type": "reasoning",
                "id": ids("rs_"),
                "summary": [
                    {"type": "summary_text", "text": t}
                    for t in draw(st.lists(st.text(min_size=1, max_size=12), max_size=2))
                ],
            }
            maybe(draw, reasoning, "encrypted_content", st.text(ID_CHARS, min_size=1, max_size=16))
            out.append(reasoning)
        if draw(st.booleans()):
            out.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "id": ids("msg_"),
                    "status": "completed",
                    "content": [{"type": "output_text", "text": draw(sent), "annotations": []}],
                }
            )
        calls = []
        for _ in range(draw(st.integers(0, 2))):
            call: dict[str, Any] = {
                "type": "function_call",
                "call_id": ids("call_"),
                "name": draw(names),
                "arguments": arguments(draw, draw(args)),
            }
            maybe(draw, call, "id", st.just(ids("fc_")))
            maybe(draw, call, "status", st.just("completed"))
            calls.append(call)
        out.extend(calls)
        for call in calls:
            out.append(
                {"type": "function_call_output", "call_id": call["call_id"], "output": draw(texts)}
            )
        out.append({"role": "assistant", "content": draw(sent)})
    return out


# ---------------------------------------------------------------- Anthropic
@st.composite
def anthropic_payloads(draw: Any) -> dict[str, Any]:
    ids = Ids(draw)
    payload: dict[str, Any] = {}
    if draw(st.booleans()):
        blocks = [{"type": "text", "text": draw(filled)} for _ in range(draw(st.integers(1, 2)))]
        if draw(st.booleans()):
            blocks[-1]["cache_control"] = {"type": "ephemeral"}
        payload["system"] = blocks if len(blocks) > 1 or draw(st.booleans()) else blocks[0]["text"]
    messages: list[dict[str, Any]] = []
    pending: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        user_blocks: list[dict[str, Any]] = []
        for call_id in pending:
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id}
            body = draw(filled)
            result["content"] = [{"type": "text", "text": body}] if draw(st.booleans()) else body
            maybe(draw, result, "is_error", st.booleans())
            user_blocks.append(result)
        if not pending or draw(st.booleans()):
            user_blocks.append({"type": "text", "text": draw(filled)})
        if draw(st.booleans()):
            user_blocks.append(
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                }
            )
        single_text = len(user_blocks) == 1 and user_blocks[0]["type"] == "text"
        messages.append(
            {
                "role": "user",
                "content": user_blocks[0]["text"]
                if single_text and draw(st.booleans())
                else user_blocks,
            }
        )
        blocks = []
        if draw(st.booleans()):
            blocks.append(
                draw(
                    st.sampled_from(
                        [
                            {
                                "type": "thinking",
                                "thinking": "let me see",
                                "signature": "EqQBCgIYAhIM",
                            },
                            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3p"},
                        ]
                    )
                )
            )
        blocks.append({"type": "text", "text": draw(filled)})
        pending = [ids("toolu_") for _ in range(draw(st.integers(0, 2)))]
        blocks.extend(
            {"type": "tool_use", "id": call_id, "name": draw(names), "input": draw(args)}
            for call_id in pending
        )
        single_text = len(blocks) == 1
        messages.append(
            {
                "role": "assistant",
                "content": blocks[0]["text"] if single_text and draw(st.booleans()) else blocks,
            }
        )
    payload["messages"] = messages
    return payload


# ---------------------------------------------------------------- Gemini
@st.composite
def gemini_payloads(draw: Any) -> dict[str, Any]:
    ids = Ids(draw)
    payload: dict[str, Any] = {}
    if draw(st.booleans()):
        payload["system_instruction"] = {"parts": [{"text": draw(filled)}]}
    contents: list[dict[str, Any]] = []
    pending: list[tuple[str, str | None]] = []
    for _ in range(draw(st.integers(1, 3))):
        parts: list[dict[str, Any]] = []
        for name, call_id in pending:
            response: dict[str, Any] = {
                "name": name,
                "response": draw(
                    st.dictionaries(
                        st.sampled_from(["result", "output", "error"]), json_values, max_size=2
                    )
                ),
            }
            if call_id is not None:
                response["id"] = call_id
            parts.append({"functionResponse": response})
        if not pending or draw(st.booleans()):
            parts.append({"text": draw(filled)})
        if draw(st.booleans()):
            parts.append({"inlineData": {"mimeType": "image/png", "data": PNG}})
        contents.append({"role": "user", "parts": parts})
        model: list[dict[str, Any]] = []
        if draw(st.booleans()):
            model.append({"text": draw(filled), "thought": True})
        model.append({"text": draw(filled)})
        with_ids = draw(st.booleans())
        pending = [
            (draw(names), ids("fc_") if with_ids else None) for _ in range(draw(st.integers(0, 2)))
        ]
        for name, call_id in pending:
            call: dict[str, Any] = {"name": name, "args": draw(args)}
            if call_id is not None:
                call["id"] = call_id
            part: dict[str, Any] = {"functionCall": call}
            maybe(
                draw,
                part,
                "thoughtSignature",
                st.binary(min_size=3, max_size=9).map(lambda b: base64.b64encode(b).decode()),
            )
            model.append(part)
        contents.append({"role": "model", "parts": model})
    payload["contents"] = contents
    return payload


# ---------------------------------------------------------------- the message-layer format
timestamps = st.one_of(
    st.integers(1_600_000_000, 1_900_000_000),
    st.floats(1_600_000_000, 1_900_000_000, allow_nan=False).map(lambda x: round(x, 3)),
)


@st.composite
def message_layer_payloads(draw: Any) -> list[dict[str, Any]]:
    ids = Ids(draw)
    out: list[dict[str, Any]] = []

    def base(role: str, contents: list[dict[str, Any]]) -> dict[str, Any]:
        return {"role": role, "contents": contents, "id": ids("m"), "timestamp": draw(timestamps)}

    if draw(st.booleans()):
        out.append(base("system", [{"type": "text", "content": draw(texts)}]))
    for _ in range(draw(st.integers(1, 3))):
        contents: list[dict[str, Any]] = [{"type": "text", "content": draw(texts)}]
        if draw(st.booleans()):
            images = draw(
                st.lists(
                    st.sampled_from(
                        ["https://example.com/a.png", PNG, f"data:image/png;base64,{PNG}"]
                    ),
                    min_size=1,
                    max_size=2,
                )
            )
            contents.append({"type": "image", "images": images})
        if draw(st.booleans()):
            contents.append({"type": "audio", "audio": ["SUQzBAAAAAAA", "file:clip.mp3"]})
        out.append(base("user", contents))
        calls = [
            {
                "type": "tool_call",
                "id": ids("c"),
                "name": draw(names),
                "kind": draw(st.sampled_from([None, "read", "edit"])),
                "args": draw(args),
            }
            for _ in range(draw(st.integers(0, 2)))
        ]
        reply: list[dict[str, Any]] = []
        if draw(st.booleans()):
            reply.append(
                {
                    "type": "thinking",
                    "content": draw(texts),
                    "signature": draw(st.text(ID_CHARS, max_size=10)),
                }
            )
        reply.append({"type": "text", "content": draw(texts)})
        assistant = base("assistant", reply + calls)
        usage = {
            "input_tokens": draw(st.integers(0, 5000)),
            "output_tokens": draw(st.integers(0, 900)),
            "cache_read_tokens": draw(st.integers(0, 100)),
            "cache_write_tokens": draw(st.integers(0, 100)),
            "cost": {
                "input": 0.25,
                "output": 0.5,
                "cache_read": 0.0,
                "cache_write": 0.0,
                "total": 0.75,
            },
        }
        assistant.update(
            usage=usage,
            stop_reason="toolUse" if calls else draw(st.sampled_from(["stop", "length"])),
            error="",
        )
        out.append(assistant)
        if calls:
            results = [
                {
                    "type": "tool_result",
                    "id": call["id"],
                    "content": draw(texts),
                    "is_error": draw(st.booleans()),
                    "metadata": draw(
                        st.dictionaries(st.sampled_from(["took_ms", "hook"]), json_leaf, max_size=2)
                    ),
                    "terminate": draw(st.booleans()),
                }
                for call in calls
            ]
            out.append(base(draw(st.sampled_from(["tool", "user"])), results))
        if draw(st.booleans()):
            role = draw(st.sampled_from(["custom", "branch_summary", "compaction_summary"]))
            extra = base(role, [{"type": "text", "content": draw(texts)}])
            if role == "custom":
                extra["custom_type"] = draw(st.sampled_from(["bookmark", "ui.note"]))
            out.append(extra)
    return out


# ---------------------------------------------------------------- the agent-graph format
def _media(draw: Any) -> dict[str, Any]:
    media = dict.fromkeys(
        (
            "url",
            "file_id",
            "data_base64",
            "mime_type",
            "size_bytes",
            "sha256",
            "filename",
            "width",
            "height",
            "duration_ms",
            "page",
        )
    )
    kind = draw(st.sampled_from(["url", "data"]))
    media["kind"] = kind
    if kind == "url":
        media["url"] = "https://example.com/a.png"
    else:
        media.update(data_base64=PNG, mime_type="image/png", width=1, height=1)
    return media


@st.composite
def agent_graph_payloads(draw: Any) -> list[dict[str, Any]]:
    ids = Ids(draw)
    out: list[dict[str, Any]] = []

    def message(
        role: str, content: list[dict[str, Any]], usages: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        message_id: Any = (
            draw(st.integers(1, 10**12)) + ids.n * 10**13 if draw(st.booleans()) else ids("msg-")
        )
        ids.n += 1
        stamp: Any = draw(timestamps)
        if draw(st.booleans()):
            stamp = datetime.fromtimestamp(int(stamp), tz=UTC).isoformat()
        return {
            "message_id": message_id,
            "role": role,
            "content": content,
            "delta": False,
            "tools_calls": None,
            "reasoning": None,
            "timestamp": stamp,
            "metadata": draw(
                st.dictionaries(st.sampled_from(["node", "model"]), texts, max_size=2)
            ),
            "usages": usages,
            "raw": None,
        }

    def text() -> dict[str, Any]:
        return {"type": "text", "text": draw(texts), "annotations": []}

    if draw(st.booleans()):
        out.append(message("system", [text()]))
    for _ in range(draw(st.integers(1, 3))):
        blocks = [text()]
        if draw(st.booleans()):
            blocks.append(
                {
                    "type": "image",
                    "media": _media(draw),
                    "alt_text": draw(st.none() | texts),
                    "bbox": None,
                }
            )
        out.append(message("user", blocks))
        reply: list[dict[str, Any]] = []
        if draw(st.booleans()):
            reply.append(
                {
                    "type": "reasoning",
                    "summary": draw(texts),
                    "details": draw(st.none() | st.lists(texts, max_size=2)),
                }
            )
        reply.append(text())
        calls = [
            {
                "type": "tool_call",
                "id": ids("call_"),
                "name": draw(names),
                "args": draw(args),
                "tool_type": draw(st.sampled_from([None, "function"])),
            }
            for _ in range(draw(st.integers(0, 2)))
        ]
        prompt, completion = draw(st.integers(0, 9000)), draw(st.integers(0, 900))
        usages = {
            "completion_tokens": completion,
            "prompt_tokens": prompt,
            "total_tokens": prompt + completion,
            "reasoning_tokens": draw(st.integers(0, 50)),
            "cache_creation_input_tokens": draw(st.integers(0, 50)),
            "cache_read_input_tokens": draw(st.integers(0, 50)),
            "image_tokens": 0,
            "audio_tokens": 0,
        }
        out.append(message("assistant", reply + calls, usages if draw(st.booleans()) else None))
        for call in calls:
            output = draw(
                st.one_of(
                    texts,
                    st.dictionaries(st.sampled_from(["value", "items"]), json_values, max_size=2),
                )
            )
            result = {
                "type": "tool_result",
                "call_id": call["id"],
                "output": output,
                "is_error": draw(st.booleans()),
                "status": draw(st.sampled_from([None, "completed", "failed"])),
            }
            out.append(message("tool", [result]))
        if draw(st.booleans()):
            out.append(
                message(
                    "assistant",
                    [{"type": "error", "message": draw(texts), "code": None, "data": None}],
                )
            )
    return out


# ---------------------------------------------------------------- mindstore conversations
@st.composite
def conversations(draw: Any) -> list[Any]:
    """A mindstore conversation as an agent writes it: config, system prompt, turns with
    reasoning (signed), parallel tool calls and their results (some with `terminate` and
    metadata), a hidden and a model-visible informational message."""
    ids = Ids(draw)
    out: list[Any] = [TaskConfigMessage(content=[TaskConfigPart(model_name="openai/gpt-4o")])]
    if draw(st.booleans()):
        out.append(SystemMessage(id=ids("s"), content=[TextPart(text=draw(texts))]))
    for _ in range(draw(st.integers(1, 3))):
        parts: list[Any] = [TextPart(text=draw(texts))]
        if draw(st.booleans()):
            parts.append(
                draw(
                    st.sampled_from(
                        [
                            ImagePart(image=PNG, mime_type="image/png"),
                            ImagePart(
                                media=MediaRef(kind="url", url="https://example.com/cat.png")
                            ),
                        ]
                    )
                )
            )
        out.append(UserMessage(id=ids("u"), content=parts))
        reply: list[Any] = []
        if draw(st.booleans()):
            reply.append(
                ReasoningPart(
                    reasoning=draw(st.text(min_size=1, max_size=20).filter(_unmarked)),
                    signature="sig-" + draw(st.text(ID_CHARS, max_size=8)),
                )
            )
        reply.append(TextPart(text=draw(texts)))
        calls = [
            ToolCallPart(tool_call_id=ids("call_"), tool_name=draw(names), args=draw(args))
            for _ in range(draw(st.integers(0, 3)))
        ]
        out.append(AssistantMessage(id=ids("a"), content=reply + calls, status="completed"))
        for call in calls:
            result: Any = draw(
                st.one_of(
                    texts,
                    st.dictionaries(
                        st.sampled_from(["value", "rows"]), json_leaf, min_size=1, max_size=2
                    ),
                )
            )
            contents = (
                [ToolResultContent(type="text", text=draw(texts))] if draw(st.booleans()) else []
            )
            out.append(
                ToolMessage(
                    id=ids("t"),
                    content=[
                        ToolResultPart(
                            tool_call_id=call.tool_call_id,
                            tool_name=call.tool_name,
                            result=result,
                            tool_result_contents=contents,
                            is_error=draw(st.booleans()),
                            terminate=draw(st.booleans()),
                            metadata={"hook": "audit"},
                        )
                    ],
                )
            )
        if draw(st.booleans()):
            visible = draw(st.booleans())
            out.append(
                InformationalMessage(
                    id=ids("i"),
                    content=[
                        InformationalPart(
                            is_visible_ai=visible,
                            informational_type="note",
                            details="visible note" if visible else "hidden note",
                        )
                    ],
                )
            )
        if calls:
            out.append(
                AssistantMessage(
                    id=ids("a"), content=[TextPart(text=draw(texts))], status="completed"
                )
            )
    return out
