"""The compression document's checkpoint, and where it lives inside a compression message.

A checkpoint is cumulative: it lists every id of the level that is compressed as of that
checkpoint, not only what this round added, so the context view needs the latest
checkpoint of the level and nothing else (one small pipeline read). Messages are never
deleted; a checkpoint only says how the view treats them:

- *dropped* ids leave the view; a summary (the compression part's `cache["summary"]`)
  stands in for them, placed after `summary_after_id` (None: at the start of the level);
- *stubbed* ids (`metadata["stubbed_message_ids"]`) stay in place as short tool-result
  stubs, so every tool call keeps its answer and provider APIs accept the request.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from mindstore.errors import ValidationError
from mindstore.model.base import Timestamp, new_id, now_ts
from mindstore.model.messages import AnyMessage, CompressionMessage
from mindstore.model.parts import CompressionPart

STUBBED_KEY = "stubbed_message_ids"
SUMMARY_AFTER_KEY = "summary_after_id"
STRATEGY_KEY = "strategy"
SUMMARY_ID_KEY = "summary_message_id"
SPAN_KEY = "span"
ROUND_KEY = "round"


class CompressionCheckpoint(BaseModel):
    """What one compression round decided, as the compression document stores it in
    `metadata["checkpoint"]`."""

    checkpoint_id: str = ""
    timestamp: Timestamp = Field(default_factory=now_ts)
    """Epoch seconds, to the millisecond when mindstore stamps it; older checkpoints hold
    whole seconds (an int), read as they are."""
    compressed_message_ids: list[str] = Field(default_factory=list)
    kept_message_ids: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    summary: str | None = None
    """Carried in the compression part's `cache`, not in the checkpoint dict (the document's
    layout)."""

    def is_message_compressed(self, message_id: str) -> bool:
        return message_id in self.compressed_message_ids

    @property
    def stubbed_ids(self) -> list[str]:
        return list(self.metadata.get(STUBBED_KEY, []))

    @property
    def dropped_ids(self) -> list[str]:
        stubbed = set(self.stubbed_ids)
        return [mid for mid in self.compressed_message_ids if mid not in stubbed]

    @property
    def summary_after_id(self) -> str | None:
        return self.metadata.get(SUMMARY_AFTER_KEY)

    def message_metadata(self) -> dict[str, Any]:
        """The compression part's `metadata`: `{"checkpoint": {...}}` as the compression
        document reads it."""
        return {
            "checkpoint": {
                "checkpoint_id": self.checkpoint_id,
                "timestamp": self.timestamp,
                "compressed_message_ids": list(self.compressed_message_ids),
                "kept_message_ids": list(self.kept_message_ids),
                "metadata": dict(self.metadata),
            }
        }

    def cache(self) -> dict[str, Any]:
        return {"summary": self.summary} if self.summary is not None else {}

    @classmethod
    def from_parts(
        cls, metadata: dict[str, Any] | None, cache: dict[str, Any] | None
    ) -> CompressionCheckpoint | None:
        """Read a checkpoint back from a compression part; None if the part has none."""
        data = (metadata or {}).get("checkpoint")
        if not isinstance(data, dict):
            return None
        summary = (cache or {}).get("summary")
        return cls(
            checkpoint_id=data.get("checkpoint_id", ""),
            timestamp=_stored_timestamp(data.get("timestamp")),
            compressed_message_ids=list(data.get("compressed_message_ids", [])),
            kept_message_ids=list(data.get("kept_message_ids", [])),
            metadata=dict(data.get("metadata", {}) or {}),
            summary=summary if isinstance(summary, str) else None,
        )


def _stored_timestamp(value: Any) -> Timestamp:
    """A stored checkpoint's timestamp as written (int seconds or float); absent is 0 and
    anything else is read as the integer it spells, as before milliseconds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    return int(value or 0)


def checkpoints_in(level: Sequence[AnyMessage]) -> list[CompressionCheckpoint]:
    """Every checkpoint stored in a level's compression messages, oldest first.

    Level order is append order, which is also time order; the compression document sorted by
    `started_ts`, which cannot order two rounds stamped in the same millisecond (or, in the
    Mind Map's integer form, the same second).
    """
    found: list[CompressionCheckpoint] = []
    for message in level:
        if not isinstance(message, CompressionMessage):
            continue
        for part in message.content:
            if isinstance(part, CompressionPart):
                checkpoint = CompressionCheckpoint.from_parts(part.metadata, part.cache)
                if checkpoint is not None:
                    found.append(checkpoint)
    return found


def _default_anchor(order: Sequence[str], dropped: set[str]) -> str | None:
    """Where a summary goes when the strategy did not say: after the last message that
    stays in the view before the first dropped one (None: at the start of the level)."""
    anchor = None
    for message_id in order:
        if message_id in dropped:
            return anchor
        anchor = message_id
    return anchor


def merge_round(
    previous: CompressionCheckpoint | None,
    new: CompressionCheckpoint,
    conversation: Sequence[AnyMessage],
    strategy_type: str,
) -> CompressionCheckpoint | None:
    """The level's next cumulative checkpoint: `previous` plus what one round recorded in
    `new`, or None when the round compressed nothing new (nothing is written then).

    Any strategy may record only what its round adds; the built-in ones record everything
    so far, which merges to the same result. A dropped id stays dropped and a stubbed id
    may later be dropped, never the reverse, so views only ever shrink.
    """
    order = [m.id for m in conversation]
    known = set(order)
    stray = [mid for mid in new.compressed_message_ids if mid not in known]
    if stray:
        raise ValidationError(
            f"strategy {strategy_type!r} compressed ids that are not in the current level's "
            f"conversation: {stray[:5]}"
        )
    new_stubbed = set(new.stubbed_ids) & set(new.compressed_message_ids)
    prev_dropped = set(previous.dropped_ids) if previous else set()
    prev_stubbed = set(previous.stubbed_ids) if previous else set()
    prev_summary = previous.summary if previous else None
    dropped = prev_dropped | (set(new.compressed_message_ids) - new_stubbed)
    stubbed = (prev_stubbed | new_stubbed) - dropped
    summary = new.summary if new.summary is not None else prev_summary
    if dropped == prev_dropped and stubbed == prev_stubbed and summary == prev_summary:
        return None
    changed = (dropped - prev_dropped) | (stubbed - prev_stubbed)
    positions = (
        [i for i, mid in enumerate(order) if mid in changed]
        or [i for i, mid in enumerate(order) if mid in dropped | stubbed]
        or [0]
    )
    metadata: dict[str, Any] = {**(previous.metadata if previous else {}), **new.metadata}
    metadata[STRATEGY_KEY] = strategy_type
    metadata[STUBBED_KEY] = [mid for mid in order if mid in stubbed]
    metadata[SPAN_KEY] = [positions[0], positions[-1]]
    previous_round = int((previous.metadata if previous else {}).get(ROUND_KEY, 0) or 0)
    metadata[ROUND_KEY] = int(new.metadata.get(ROUND_KEY) or previous_round + 1)
    if SUMMARY_AFTER_KEY not in new.metadata and metadata.get(SUMMARY_AFTER_KEY) in dropped | {
        None
    }:
        metadata[SUMMARY_AFTER_KEY] = _default_anchor(order, dropped)  # unset, or now dropped
    if dropped - prev_dropped and SUMMARY_ID_KEY not in new.metadata:
        metadata[SUMMARY_ID_KEY] = new_id()
    compressed = dropped | stubbed
    return CompressionCheckpoint(
        checkpoint_id=new.checkpoint_id or (order[-1] if order else ""),
        timestamp=new.timestamp,
        compressed_message_ids=[mid for mid in order if mid in compressed],
        kept_message_ids=[mid for mid in order if mid not in compressed],
        metadata=metadata,
        summary=summary,
    )
