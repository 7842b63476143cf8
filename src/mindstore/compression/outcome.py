"""A compression round's outcome, recorded on its checkpoint (pure).

It makes compression run once per need.

`tasks.context(...)` compresses a level that passes its `token_limit`. A round that
cannot bring the level under the limit is itself a result: the checkpoint it writes
records what was tried and the tokens before and after (`CompressionOutcome`, under
`metadata["outcome"]`), also when nothing new could be compressed (the checkpoint then
repeats the previous one). The next call reads that and does not try again until the
level has grown by `retry_after` visible messages; a round that did reach the limit lets
the next calls count the level as its tokens after plus the messages added since,
without reading the level.

An outcome belongs to the round that wrote it (`round`): a later round written by other
code carries the metadata over, and a mismatched round makes the outcome void.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field
from pydantic import ValidationError as PydanticValidationError

from mindstore.compression.checkpoint import (
    ROUND_KEY,
    SPAN_KEY,
    STRATEGY_KEY,
    STUBBED_KEY,
    CompressionCheckpoint,
)
from mindstore.model.base import now_ts
from mindstore.model.messages import AnyMessage, CompressionMessage
from mindstore.model.parts import CompressionPart

OUTCOME_KEY = "outcome"
DEFAULT_RETRY_AFTER = 10


class Attempt(BaseModel):
    """One strategy tried in a round."""

    strategy: str
    tokens_before: int
    tokens_after: int
    compressed: int = 0
    """Ids this strategy newly compressed (dropped or stubbed)."""


class CompressionOutcome(BaseModel):
    """What a round by `tasks.context(...)` achieved (stored with its checkpoint)."""

    round: int
    tried: list[Attempt] = Field(default_factory=list)
    tokens_before: int
    tokens_after: int
    token_limit: int
    reached: bool
    visible_count: int
    """Visible messages of the level's view after the round: a later read compares its
    own count with it to know how many messages came since."""
    retry_after: int = DEFAULT_RETRY_AFTER
    """When the limit was not reached: visible messages to wait for before trying again."""

    def note(self) -> str:
        tried = ", ".join(a.strategy for a in self.tried) or "nothing"
        return (
            f"compression round {self.round} ({tried}) could not reach token_limit "
            f"{self.token_limit}: {self.tokens_before} -> {self.tokens_after} tokens"
        )


def outcome_of(checkpoint: CompressionCheckpoint | None) -> CompressionOutcome | None:
    """The outcome recorded by the round that wrote `checkpoint`, or None (no outcome,
    an unreadable one, or one carried over from an earlier round)."""
    if checkpoint is None:
        return None
    data = checkpoint.metadata.get(OUTCOME_KEY)
    if not isinstance(data, dict):
        return None
    try:
        outcome = CompressionOutcome.model_validate(data)
    except PydanticValidationError:
        return None
    if outcome.round != checkpoint.metadata.get(ROUND_KEY):
        return None
    return outcome


@dataclass(frozen=True)
class Due:
    """Whether a level must be compressed now: True, False, or None (unknown from what
    was read: read the whole level to decide)."""

    compress: bool | None
    tokens: int | None = None
    note: str | None = None


def compression_due(
    *,
    token_limit: int,
    outcome: CompressionOutcome | None,
    visible_count: int,
    complete_tokens: int | None,
    newest_tokens: Sequence[int],
    read_tokens: int,
    bound: float,
) -> Due:
    """Decide from one window read whether the level passes its limit.

    `complete_tokens`: the whole view's tokens when the read saw all of it; else
    `newest_tokens` (tokens of the newest visible messages read, oldest first),
    `read_tokens` (of everything read: a lower bound) and `bound` (read tokens plus the
    unread stored bytes at the read's tokens per byte: an estimate from above).
    """
    grown = visible_count - outcome.visible_count if outcome is not None else None
    waiting = outcome is not None and not outcome.reached and outcome.token_limit == token_limit
    if outcome is not None and waiting and grown is not None and 0 <= grown < outcome.retry_after:
        left = outcome.retry_after - grown
        return Due(False, None, f"{outcome.note()}; tried again after {left} more message(s)")
    if complete_tokens is not None:
        return Due(complete_tokens > token_limit, complete_tokens)
    if outcome is not None and grown is not None and 0 <= grown <= len(newest_tokens):
        tokens = outcome.tokens_after + sum(newest_tokens[len(newest_tokens) - grown :])
        return Due(tokens > token_limit, tokens)
    if read_tokens > token_limit:
        return Due(True, read_tokens)
    if bound <= token_limit:
        return Due(False, None)
    return Due(None)


def retry_after(config: Any) -> int:
    """Messages to wait for after a round that did not reach the limit: the recent window
    the strategies protect (it must move before they can compress more)."""
    keep = getattr(config, "keep_recent_messages", None)
    return (
        max(1, int(keep))
        if isinstance(keep, int) and not isinstance(keep, bool)
        else DEFAULT_RETRY_AFTER
    )


def carried_over(
    previous: CompressionCheckpoint | None, conversation: Sequence[AnyMessage], strategy: str
) -> CompressionCheckpoint:
    """The checkpoint to record an outcome on when no strategy compressed anything new:
    the previous one again (or an empty one), as the next round."""
    order = [m.id for m in conversation]
    metadata: dict[str, Any] = dict(previous.metadata) if previous is not None else {}
    metadata.setdefault(STRATEGY_KEY, strategy)
    metadata.setdefault(STUBBED_KEY, [])
    metadata.setdefault(SPAN_KEY, [0, 0])
    metadata[ROUND_KEY] = int(metadata.get(ROUND_KEY, 0) or 0) + 1
    compressed = list(previous.compressed_message_ids) if previous is not None else []
    gone = set(compressed)
    return CompressionCheckpoint(
        checkpoint_id=order[-1] if order else "",
        timestamp=now_ts(),
        compressed_message_ids=compressed,
        kept_message_ids=[mid for mid in order if mid not in gone],
        metadata=metadata,
        summary=previous.summary if previous is not None else None,
    )


def marker(
    checkpoint: CompressionCheckpoint, task_id: str, reason: str, strategies: Sequence[str]
) -> CompressionMessage:
    """An unsaved compression message holding `checkpoint`: the next strategy of a chain
    reads it as the level's latest checkpoint before anything is written."""
    start, end = checkpoint.metadata.get(SPAN_KEY, [0, 0])
    return CompressionMessage(
        task_id=task_id,
        content=[
            CompressionPart(
                start_message_idx=start,
                end_message_idx=end,
                reason=reason,
                strategies=list(strategies),
                compressed_message_ids=list(checkpoint.compressed_message_ids),
                kept_message_ids=list(checkpoint.kept_message_ids),
                cache=checkpoint.cache(),
                metadata=checkpoint.message_metadata(),
            )
        ],
    )


def without_id_lists(checkpoint: CompressionCheckpoint | None) -> CompressionCheckpoint | None:
    """The checkpoint as a window carries it: its id lists (which grow with the level)
    stay with the stored checkpoint; `ContextWindow.left_out` counts them."""
    if checkpoint is None:
        return None
    metadata = {k: v for k, v in checkpoint.metadata.items() if k != STUBBED_KEY}
    return checkpoint.model_copy(
        update={"compressed_message_ids": [], "kept_message_ids": [], "metadata": metadata}
    )
