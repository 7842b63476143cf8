"""The context view of a level: its conversation with the latest checkpoint applied.

The same function turns the pipeline's output (dropped ids already filtered out on the
server, stubbed tool results already reduced to their skeleton) and an in-memory level
(everything present) into the same list, which is what the property tests hold equal.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mindstore.compression.checkpoint import SUMMARY_ID_KEY, CompressionCheckpoint
from mindstore.compression.strategies import conversation
from mindstore.model.messages import AnyMessage, ToolMessage, UserMessage
from mindstore.model.parts import Part, TextPart, ToolResultPart
from mindstore.pipelines.context import STUB_SKELETON_FIELDS

DEFAULT_STUB_TEXT = "[tool result compressed]"
SUMMARY_MARKER = "mindstore_summary_of"
"""Metadata key on the synthetic summary message (the checkpoint id it stands for)."""


def stub_message(message: AnyMessage, stub_text: str = DEFAULT_STUB_TEXT) -> ToolMessage:
    """A tool message reduced to its header and one short result per answered call.

    Built only from `STUB_SKELETON_FIELDS` and the results' call ids and tool names, the
    fields the context pipeline projects, so both paths build identical stubs."""
    fields: dict[str, Any] = {name: getattr(message, name, None) for name in STUB_SKELETON_FIELDS}
    fields["depth"] = fields["depth"] or 0
    results: list[Part] = [
        ToolResultPart(tool_call_id=part.tool_call_id, tool_name=part.tool_name, result=stub_text)
        for part in message.content
        if isinstance(part, ToolResultPart)
    ]
    fields.pop("role")
    return ToolMessage(**{k: v for k, v in fields.items() if v is not None}, content=results)


def summary_message(checkpoint: CompressionCheckpoint, like: AnyMessage | None) -> UserMessage:
    """The summary as a user message at the level of the messages it replaces."""
    return UserMessage(
        id=str(checkpoint.metadata.get(SUMMARY_ID_KEY) or f"summary-{checkpoint.checkpoint_id}"),
        task_id=getattr(like, "task_id", "") or "",
        started_ts=checkpoint.timestamp,
        finished_ts=checkpoint.timestamp,
        scope=getattr(like, "scope", None),
        depth=getattr(like, "depth", 0) or 0,
        content=[TextPart(text=checkpoint.summary or "")],
        metadata={SUMMARY_MARKER: checkpoint.checkpoint_id},
    )


def apply_checkpoint(
    level: Sequence[AnyMessage],
    checkpoint: CompressionCheckpoint | None,
    stub_text: str = DEFAULT_STUB_TEXT,
) -> list[AnyMessage]:
    """The messages to send for this level, given its latest checkpoint (or None)."""
    conv = conversation(level)
    if checkpoint is None:
        return conv
    dropped = set(checkpoint.dropped_ids)
    stubbed = set(checkpoint.stubbed_ids)
    view: list[AnyMessage] = [
        stub_message(m, stub_text) if m.id in stubbed else m for m in conv if m.id not in dropped
    ]
    if checkpoint.summary is not None and dropped:
        anchor = checkpoint.summary_after_id
        position = 0
        if anchor is not None:
            position = next((i + 1 for i, m in enumerate(view) if m.id == anchor), 0)
        like = view[position - 1] if position else (view[0] if view else None)
        view.insert(position, summary_message(checkpoint, like))
    return view
