"""A page of messages as the console shows it (pure): rows of plain-text blocks.

Everything here is text for the template to escape: stored content is agent and user
output, so nothing from a message ever becomes markup. The only value that becomes an
attribute a browser acts on is an inline image, and only as a `data:` URL of a raster type
whose payload is checked to be base64 (`image_source`): an SVG, a remote URL or anything
else is shown as text instead, so an image cannot run script or call home.

Tool calls are paired with their results: a call shows the result of the same
`tool_call_id` when that result is on the same page, and that result's own row then points
to the call rather than showing the content twice (a result whose call is on an earlier
page shows it in full).
Sub-task levels, compression checkpoints and redactions become rows of their own kind.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from mindstore.inert_text import visible
from mindstore.model.messages import AnyMessage, MessageBase, UnknownMessage
from mindstore.model.parts import (
    AudioPart,
    CompressionPart,
    DataPart,
    DocumentPart,
    ErrorPart,
    FilePart,
    ImagePart,
    InformationalPart,
    ReasoningPart,
    RedactedThinkingPart,
    TaskConfigPart,
    TaskEntryPart,
    TaskExitPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    UnknownPart,
    VideoPart,
)
from mindstore.model.plans.redaction import redaction_of

RASTER_TYPES: Final = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""Inline image types shown as images; any other (SVG above all) is shown as text."""
MAX_TEXT: Final = 20_000
"""Characters of one block shown; the rest is cut with a note (a page stays light)."""
MAX_IMAGE_BYTES: Final = 2_000_000
_BASE64: Final = re.compile(r"^[A-Za-z0-9+/]*={0,2}$")


@dataclass(frozen=True)
class Block:
    """One piece of a message: `kind` (text, reasoning, tool-call, tool-result, image,
    entry, exit, checkpoint, config, note, error, unknown), a short `title` and the `text`."""

    kind: str
    text: str = ""
    title: str = ""
    image: str | None = None
    """A checked `data:` URL (`image_source`), or None."""
    result: Block | None = None
    """For a tool call: its result, when it is on the same page."""
    failed: bool = False

    def to_json(self) -> dict[str, Any]:
        """The block for the live feed (the script builds it with `textContent`)."""
        return {
            "kind": self.kind,
            "title": visible(self.title),
            "text": visible(self.text),
            "image": self.image,
            "failed": self.failed,
            "result": self.result.to_json() if self.result else None,
        }


@dataclass(frozen=True)
class Row:
    """One message: its position, role, depth (sub-task level), time and blocks."""

    index: int
    id: str
    role: str
    depth: int
    time: str
    blocks: list[Block] = field(default_factory=list)
    redacted: str | None = None
    """Why and when the content was removed (a tombstone), or None."""
    usage: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "id": self.id,
            "role": self.role,
            "depth": self.depth,
            "time": self.time,
            "redacted": None if self.redacted is None else visible(self.redacted),
            "usage": self.usage,
            "blocks": [block.to_json() for block in self.blocks],
        }


def clip(text: str, limit: int = MAX_TEXT) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[... {len(text) - limit:,} more characters not shown]"


def as_text(value: Any) -> str:
    """Any JSON-like value as readable text (strings as they are)."""
    if isinstance(value, str):
        return clip(value)
    try:
        return clip(json.dumps(value, ensure_ascii=False, indent=1, sort_keys=True, default=str))
    except (TypeError, ValueError):
        return clip(repr(value))


def image_source(data: str | None, mime_type: str | None) -> str | None:
    """A `data:` URL for an inline raster image, or None when it is not one: the type must be
    PNG, JPEG, GIF or WebP and the payload base64 (so nothing can close the attribute)."""
    if not data or (mime_type or "").lower() not in RASTER_TYPES:
        return None
    if data.startswith("data:"):
        header, _, data = data.partition(",")
        if header.lower() != f"data:{mime_type};base64".lower():
            return None
    if len(data) > MAX_IMAGE_BYTES * 4 // 3 + 4 or not _BASE64.match(data):
        return None
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None
    return f"data:{(mime_type or '').lower()};base64,{data}"


def when(ts: float | None) -> str:
    if ts is None:
        return ""
    try:
        return datetime.fromtimestamp(float(ts), UTC).strftime("%Y-%m-%d %H:%M:%S")
    except (OverflowError, OSError, ValueError):
        return ""


def _result_block(part: ToolResultPart) -> Block:
    text = part.error if part.is_error and part.error else as_text(part.result)
    extra = [c.text for c in part.tool_result_contents if c.text]
    if extra:
        text = "\n".join([text, *extra]) if text not in ("{}", "") else "\n".join(extra)
    return Block(
        "tool-result", text, f"{part.tool_name} · {part.tool_call_id}", failed=part.is_error
    )


def _config_text(config: TaskConfigPart) -> str:
    tools = ", ".join(tool.name for tool in config.tool_metadata)
    return f"model {config.model_name}" + (f"; tools: {tools}" if tools else "")


def _media_text(kind: str, media: Any) -> str:
    if media is None:
        return f"[{kind}]"
    where = media.url or media.file_id or media.filename or ""
    return f"[{kind}{': ' + where if where else ''}]"


def part_block(part: Any, results: dict[str, Block], calls: dict[str, int] | None = None) -> Block:
    """One part as a block; a tool call takes its result from `results` (by call id), and a
    result whose call is in `calls` (call id -> message index) points to it instead of
    showing its content twice."""
    if isinstance(part, TextPart):
        return Block("text", clip(part.text))
    if isinstance(part, ReasoningPart):
        return Block("reasoning", clip(part.reasoning), "reasoning")
    if isinstance(part, ThinkingPart):
        return Block("reasoning", clip(part.content), "thinking")
    if isinstance(part, RedactedThinkingPart):
        return Block("reasoning", "[thinking withheld by the provider]", "thinking")
    if isinstance(part, ToolCallPart):
        return Block(
            "tool-call",
            as_text(part.args),
            f"{part.tool_name} · {part.tool_call_id}",
            result=results.get(part.tool_call_id),
        )
    if isinstance(part, ToolResultPart):
        at = (calls or {}).get(part.tool_call_id)
        if at is not None:
            title = f"{part.tool_name} · {part.tool_call_id}"
            return Block("tool-result", f"shown with its call in #{at}", title,
                         failed=part.is_error)  # fmt: skip
        return _result_block(part)
    if isinstance(part, ImagePart):
        source = image_source(part.image, part.mime_type)
        if source is None and part.media is not None and part.media.kind == "data":
            source = image_source(part.media.data_base64, part.media.mime_type)
        label = part.alt_text or ""
        if source is None:
            return Block("image", label or _media_text("image", part.media), "image")
        return Block("image", label, "image", image=source)
    if isinstance(part, TaskEntryPart):
        return Block("entry", _config_text(part.initial_task_config), "entered a sub-task")
    if isinstance(part, TaskExitPart):
        text = " ".join(p.text for p in part.handoff_description if isinstance(p, TextPart))
        return Block("exit", clip(text), "left the sub-task")
    if isinstance(part, TaskConfigPart):
        return Block("config", _config_text(part), "configuration")
    if isinstance(part, CompressionPart):
        return Block(
            "checkpoint",
            (
                f"messages {part.start_message_idx} to {part.end_message_idx}: "
                f"{len(part.compressed_message_ids)} compressed, {len(part.kept_message_ids)} kept"
                f"{' (' + ', '.join(part.strategies) + ')' if part.strategies else ''}; "
                f"{part.reason}"
            ),
            "compression checkpoint",
        )
    if isinstance(part, InformationalPart):
        return Block("note", clip(part.details or part.informational_type or ""), "note")
    if isinstance(part, ErrorPart):
        return Block("error", clip(part.message), part.code or "error", failed=True)
    if isinstance(part, AudioPart):
        return Block("note", clip(part.transcript or "") or "[audio]", "audio")
    if isinstance(part, (VideoPart, DocumentPart)):
        return Block("note", _media_text(part.type, part.media), part.type)
    if isinstance(part, (DataPart, FilePart)):
        return Block("note", f"[{part.mime_type}]", part.type)
    if isinstance(part, UnknownPart):
        return Block("unknown", as_text(part.raw), "unknown part")
    return Block("unknown", as_text(getattr(part, "type", "")), "part")


def _usage(message: MessageBase) -> str:
    tokens_in = getattr(message, "tokens_in", 0) or 0
    tokens_out = getattr(message, "tokens_out", 0) or 0
    cost = getattr(message, "cost", 0.0) or 0.0
    model = getattr(message, "model_id", None)
    if message.usage is not None:
        tokens_in, tokens_out = message.usage.input_tokens, message.usage.output_tokens
    if not (tokens_in or tokens_out or cost):
        return ""
    return f"{model + ' · ' if model else ''}{tokens_in} in / {tokens_out} out · ${cost:.4f}"


def rows(messages: Sequence[AnyMessage], start: int) -> list[Row]:
    """The messages `[start, start + len(messages))` of a task as rows, tool calls paired
    with the results among them."""
    results: dict[str, Block] = {}
    calls: dict[str, int] = {}
    for offset, message in enumerate(messages):
        if isinstance(message, MessageBase):
            for part in message.content:
                if isinstance(part, ToolResultPart):
                    results[part.tool_call_id] = _result_block(part)
                elif isinstance(part, ToolCallPart):
                    calls.setdefault(part.tool_call_id, start + offset)
    shown = []
    for offset, message in enumerate(messages):
        index = start + offset
        if isinstance(message, UnknownMessage):
            raw = message.raw
            shown.append(
                Row(
                    index,
                    str(raw.get("id", "")),
                    f"unknown: {raw.get('role')!s}",
                    int(message.depth),
                    when(raw.get("started_ts")),
                    [Block("unknown", as_text(raw), "unknown message")],
                )
            )
            continue
        record = redaction_of(message)
        redacted = None
        if record is not None:
            reason = record.get("reason")
            redacted = f"redacted {when(record.get('at'))}{': ' + str(reason) if reason else ''}"
        blocks = [part_block(part, results, calls) for part in message.content]
        if message.error_message:
            blocks.append(Block("error", clip(message.error_message), "error", failed=True))
        shown.append(
            Row(
                index,
                message.id,
                message.role,
                message.depth,
                when(message.started_ts),
                blocks,
                redacted,
                _usage(message),
            )
        )
    return shown
