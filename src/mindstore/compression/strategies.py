"""The three built-in compression strategies of the compression document, as pure planning
over one task level.

A strategy looks at the level's conversation and its latest checkpoint and decides which
further messages to drop (replaced by a summary) or stub (tool results shortened in
place). It returns a plan; it does no I/O and never summarises by itself, so the same
plan serves the stored task, the in-memory `Task`, and tests.

Shared rules:
- the *head* of the level is never compressed: its leading setup messages (system,
  task config, task entry, informational) and then `keep_first_messages` more (the
  opening prompt);
- the most recent `keep_recent_messages` messages are never compressed;
- a cut never separates a tool result from its call (`toolpairs.safe_cut`);
- checkpoints are cumulative: the new one lists everything compressed so far.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mindstore.compression.checkpoint import (
    STRATEGY_KEY,
    STUBBED_KEY,
    SUMMARY_AFTER_KEY,
    SUMMARY_ID_KEY,
    CompressionCheckpoint,
)
from mindstore.compression.tokens import TokenCounter, count_tokens, estimate_tokens
from mindstore.compression.toolpairs import role_of, safe_cut
from mindstore.errors import ValidationError
from mindstore.model.base import new_id
from mindstore.model.messages import AnyMessage
from mindstore.model.parts import CompressionConfig, CompressionStrategyType

SETUP_ROLES = frozenset({"system", "taskconfig", "taskentry", "informational"})


@dataclass(frozen=True)
class CompressionPlan:
    """One round's decision. `checkpoint.summary` is filled in by the caller when
    `to_summarize` is not empty (it needs the async summarizer)."""

    checkpoint: CompressionCheckpoint
    to_summarize: list[AnyMessage]
    newly_stubbed: list[AnyMessage]
    previous_summary: str | None

    @property
    def compressed_positions(self) -> tuple[int, int]:
        """First and last position, within the level's conversation, of what is compressed."""
        return self.checkpoint.metadata["span"][0], self.checkpoint.metadata["span"][1]


def conversation(level: Sequence[AnyMessage]) -> list[AnyMessage]:
    """The level without its compression messages (bookkeeping, never context)."""
    return [m for m in level if role_of(m) != "compression"]


def head_length(visible: Sequence[AnyMessage], keep_first: int) -> int:
    index = 0
    while index < len(visible) and role_of(visible[index]) in SETUP_ROLES:
        index += 1
    return min(len(visible), index + max(keep_first, 0))


def _recent_cut(visible: Sequence[AnyMessage], head: int, keep_recent: int) -> int:
    """Where the protected recent window starts (never inside the head)."""
    return max(head, len(visible) - max(keep_recent, 0))


def _turn_start(visible: Sequence[AnyMessage], cut: int, floor: int) -> int:
    """Move `cut` back to the user message that opens its turn, if there is one."""
    index = cut
    while index > floor and (index >= len(visible) or role_of(visible[index]) != "user"):
        index -= 1
    return index if index > floor else cut


def parse_strategy(strategy: CompressionStrategyType | str) -> CompressionStrategyType:
    """The strategy named by `strategy`, or a ValidationError listing the known ones."""
    try:
        return CompressionStrategyType(strategy)
    except ValueError:
        names = ", ".join(s.value for s in CompressionStrategyType)
        raise ValidationError(
            f"unknown compression strategy {strategy!r} (known: {names})"
        ) from None


def plan_compression(
    strategy: CompressionStrategyType | str,
    level: Sequence[AnyMessage],
    config: CompressionConfig,
    previous: CompressionCheckpoint | None = None,
    counter: TokenCounter = estimate_tokens,
) -> CompressionPlan | None:
    """What one more round of `strategy` compresses at this level, or None if nothing."""
    kind = parse_strategy(strategy)
    conv = conversation(level)
    dropped = set(previous.dropped_ids) if previous else set()
    stubbed = set(previous.stubbed_ids) if previous else set()
    visible = [m for m in conv if m.id not in dropped]
    head = head_length(visible, config.keep_first_messages)
    recent = _recent_cut(visible, head, config.keep_recent_messages)

    new_drop: list[AnyMessage] = []
    new_stub: list[AnyMessage] = []
    if kind is CompressionStrategyType.tool_compression:
        new_stub = [m for m in visible[head:recent] if role_of(m) == "tool" and m.id not in stubbed]
    else:
        if kind is CompressionStrategyType.truncate_and_summarize:
            target = int(config.token_limit * config.target_ratio)
            total = count_tokens(visible, counter)
            cut = head
            while cut < recent and total > target:
                total -= counter(visible[cut])
                cut += 1
        else:  # compact_summarization: everything but the most recent turns
            cut = _turn_start(visible, recent, head)
        cut = safe_cut(visible, cut, floor=head)
        new_drop = visible[head:cut]
    if not new_drop and not new_stub:
        return None

    dropped |= {m.id for m in new_drop}
    stubbed = (stubbed | {m.id for m in new_stub}) - dropped
    compressed = [m.id for m in conv if m.id in dropped or m.id in stubbed]
    touched_ids = {m.id for m in new_drop} | {m.id for m in new_stub}
    touched = [i for i, m in enumerate(conv) if m.id in touched_ids]
    metadata = dict(previous.metadata) if previous else {}
    metadata.update({
        STRATEGY_KEY: kind.value,
        STUBBED_KEY: [m.id for m in conv if m.id in stubbed],
        SUMMARY_AFTER_KEY: visible[head - 1].id if head else None,
        "span": [touched[0], touched[-1]],
        "round": int(metadata.get("round", 0)) + 1,
    })  # fmt: skip
    if new_drop:
        metadata[SUMMARY_ID_KEY] = new_id()
    checkpoint = CompressionCheckpoint(
        checkpoint_id=conv[-1].id,
        compressed_message_ids=compressed,
        kept_message_ids=[m.id for m in conv if m.id not in dropped and m.id not in stubbed],
        metadata=metadata,
        summary=previous.summary if previous else None,
    )
    return CompressionPlan(
        checkpoint=checkpoint,
        to_summarize=list(new_drop),
        newly_stubbed=list(new_stub),
        previous_summary=previous.summary if previous else None,
    )
