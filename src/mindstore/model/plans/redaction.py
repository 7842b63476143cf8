"""Redaction (pure): a message's content removed, its shape kept.

A redacted message keeps what the conversation's structure and the analytics depend on:
its id, role, timestamps, scope, status, model, usage and cost, and for tool calls and
results the pairing (call id, tool name, error and loading flags). Everything a person or a
model wrote (texts, arguments, results, images, reasoning, metadata) is gone, and the
message records the redaction itself (`redaction: {at, reason, parts}`), never the content.
"""

from __future__ import annotations

from typing import Any

from mindstore.errors import ValidationError
from mindstore.model.base import JSON, now_ts
from mindstore.model.header import TaskHeader
from mindstore.model.messages import AnyMessage, MessageBase, UnknownMessage, parse_message
from mindstore.model.plans.core import Plan, Planner, typed_errors
from mindstore.payloads import find_markers
from mindstore.validation import check_optional_int, check_optional_text

SHAPE_FIELDS = frozenset({
    "type", "tool_call_id", "tool_name", "is_error", "is_loading", "is_approval_pending",
    "is_approved", "terminate", "started_ts", "finished_ts",
})  # fmt: skip
"""Part fields a tombstone keeps: the part's kind and the tool pairing, never content."""
MAX_REASON_CHARS = 1000


EMPTY_CONTENT: dict[str, JSON] = {"text": {"text": ""}, "reasoning": {"reasoning": ""}}
"""Required content fields, emptied, for the part types that have them."""
STRUCTURAL_ROLES = frozenset({"taskconfig", "taskentry", "taskexit", "compression"})


def tombstone_part(part: Any) -> JSON:
    """The part reduced to its shape (see `SHAPE_FIELDS`)."""
    document = part.to_dict() if hasattr(part, "to_dict") else dict(part)
    kept = {key: value for key, value in document.items() if key in SHAPE_FIELDS}
    return {**kept, **EMPTY_CONTENT.get(str(kept.get("type")), {})}


def redaction_of(message: AnyMessage) -> JSON | None:
    """The redaction record of a message (None if it was never redacted)."""
    record = getattr(message, "redaction", None)
    if record is None and isinstance(message, MessageBase):
        record = (message.model_extra or {}).get("redaction")
    return record if isinstance(record, dict) else None


@typed_errors
def plan_redact(
    header: TaskHeader,
    task_id: str,
    index: int,
    message: AnyMessage,
    reason: str | None = None,
    part_index: int | None = None,
    **kw: Any,
) -> Plan:
    """Replace the message's content (or one part) by tombstones, in one guarded patch.

    Redacting what is already redacted writes nothing and returns the stored message, so
    a replay (or a second operator) is harmless.
    """
    check_optional_text(reason, "reason", max_chars=MAX_REASON_CHARS)
    check_optional_int(part_index, "part_index")
    if isinstance(message, UnknownMessage) or message.role in STRUCTURAL_ROLES:
        raise ValidationError(
            f"a {message.role} message holds no conversation content to redact (only user, "
            f"assistant, system, tool and informational messages can be redacted)"
        )
    planner = Planner(header, task_id, **kw)
    record = redaction_of(message)
    parts = list(message.content)
    if part_index is not None and part_index >= len(parts):
        raise ValidationError(f"part_index {part_index} is past the message's {len(parts)} parts")
    targets = list(range(len(parts))) if part_index is None else [part_index]
    done = set(record.get("parts", [])) if record else set()
    if record and ((part_index is None and record.get("whole")) or set(targets) <= done):
        return planner.finish(message)
    original = message.to_dict()
    document = message.to_dict()
    document["content"] = [
        tombstone_part(part) if position in targets else document["content"][position]
        for position, part in enumerate(parts)
    ]
    whole = part_index is None or bool(record and record.get("whole"))
    if whole:
        document["metadata"] = None
    removed: set[str] = set()
    find_markers(original if whole else [original["content"][p] for p in targets], removed)
    kept: set[str] = set()
    find_markers(document, kept)
    document["redaction"] = {
        "at": now_ts(),
        "reason": reason,
        "parts": sorted(done | set(targets)),
        "whole": whole,
        # payload ids (never content), so a second call can finish deleting them
        "payloads": sorted(set((record or {}).get("payloads", [])) | (removed - kept)),
    }
    new = parse_message(document)
    content = [part.to_dict() for part in new.content]
    paths: list[tuple[str, Any]] = [("content", content), ("redaction", document["redaction"])]
    if whole:
        paths.append(("metadata", None))
    planner.patch_message(index, message, new, paths, replaces_content=True)
    return planner.finish(new)


WITHHELD_SUMMARY = "[summary withheld: a message it covered was redacted]"
"""What a compression summary becomes when a message it summarised is redacted: it was
written from that message's content, so keeping it would keep what was redacted."""


def covers(part: JSON, message_id: str) -> bool:
    """Whether a stored compression part's summary was written from `message_id` (the
    part lists it among the ids compressed so far, and holds a summary not yet withheld)."""
    cache = part.get("cache")
    ids = part.get("compressed_message_ids")
    return (
        part.get("type") == "compression"
        and isinstance(ids, list)
        and message_id in ids
        and isinstance(cache, dict)
        and "summary" in cache
        and cache["summary"] != WITHHELD_SUMMARY
    )


@typed_errors
def plan_withhold_summary(
    header: TaskHeader,
    task_id: str,
    index: int,
    message: AnyMessage,
    redacted_id: str,
    **kw: Any,
) -> Plan:
    """Replace the summary of each compression part of `message` written from the redacted
    message `redacted_id` by `WITHHELD_SUMMARY`, in one guarded patch; nothing when none
    is left to replace (a replay)."""
    planner = Planner(header, task_id, **kw)
    document = message.to_dict()
    parts = document.get("content")
    if message.role != "compression" or not isinstance(parts, list):
        return planner.finish(message)
    changed = False
    for part in parts:
        if isinstance(part, dict) and covers(part, redacted_id):
            part["cache"] = {**part["cache"], "summary": WITHHELD_SUMMARY}
            changed = True
    if not changed:
        return planner.finish(message)
    new = parse_message(document)
    content = [part.to_dict() for part in new.content]
    planner.patch_message(index, message, new, [("content", content)], replaces_content=True)
    return planner.finish(new)
