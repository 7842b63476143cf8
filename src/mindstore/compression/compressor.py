"""Seed 004's `Compressor`: load a level's checkpoints, compress, transform.

The only compression module that does I/O, and only through a `LevelSource`: the stored
task (`StoredLevel`, which appends checkpoints with the repository's atomic append) or an
in-memory `Task` (`MemoryLevel`). Both run the same pure strategy planning, so a stored
task and its in-memory twin compress identically.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from mindstore.compression.checkpoint import CompressionCheckpoint, checkpoints_in
from mindstore.compression.strategies import (
    CompressionPlan,
    conversation,
    parse_strategy,
    plan_compression,
)
from mindstore.compression.summarizer import ExtractiveSummarizer, Summarizer
from mindstore.compression.tokens import TokenCounter, estimate_tokens
from mindstore.compression.view import apply_checkpoint
from mindstore.errors import ValidationError
from mindstore.model.messages import AnyMessage
from mindstore.model.parts import CompressionConfig, CompressionStrategyType

if TYPE_CHECKING:
    from mindstore.model.task import Task
    from mindstore.repositories.tasks import TaskRepository

REASON = "compression"


class LevelSource(Protocol):
    """The current level of one task, and a way to append a checkpoint to it."""

    async def level(self) -> list[AnyMessage]: ...

    async def append_checkpoint(self, plan: CompressionPlan, reason: str) -> AnyMessage: ...


def _compression_args(plan: CompressionPlan, reason: str) -> dict:
    start, end = plan.compressed_positions
    checkpoint = plan.checkpoint
    return {
        "start_idx": start,
        "end_idx": end,
        "reason": reason,
        "strategies": [checkpoint.metadata["strategy"]],
        "compressed_message_ids": list(checkpoint.compressed_message_ids),
        "kept_message_ids": list(checkpoint.kept_message_ids),
        "cache": checkpoint.cache(),
        "metadata": checkpoint.message_metadata(),
    }


class StoredLevel:
    """The current level of a stored task; checkpoints go in with one atomic append."""

    def __init__(self, tasks: "TaskRepository", task_id: str) -> None:
        self.tasks = tasks
        self.task_id = task_id

    async def level(self) -> list[AnyMessage]:
        return await self.tasks.current_task_messages(self.task_id)

    async def append_checkpoint(self, plan: CompressionPlan, reason: str) -> AnyMessage:
        return await self.tasks.add_compression_message(self.task_id, **_compression_args(plan, reason))


class MemoryLevel:
    """The current level of an in-memory `Task` (seed 004 ran on these)."""

    def __init__(self, task: "Task") -> None:
        self.task = task

    async def level(self) -> list[AnyMessage]:
        return self.task.current_task_messages()

    async def append_checkpoint(self, plan: CompressionPlan, reason: str) -> AnyMessage:
        return self.task.add_compression_message(**_compression_args(plan, reason))


class Compressor:
    """Compress one task level with one strategy (seed 004).

    `load` reads the level's checkpoints; `compress` plans one more round, summarises what
    it drops, appends the checkpoint (messages are never deleted) and returns the new
    view; `transform` returns the view of the latest checkpoint without writing.
    """

    def __init__(
        self,
        strategy: CompressionStrategyType | str,
        config: CompressionConfig | None = None,
        *,
        summarizer: Summarizer | None = None,
        token_counter: TokenCounter = estimate_tokens,
    ) -> None:
        self.strategy = parse_strategy(strategy)
        self.config = config or CompressionConfig()
        self.summarizer: Summarizer = summarizer or ExtractiveSummarizer()
        self.token_counter = token_counter
        self.checkpoints: list[CompressionCheckpoint] = []
        self._source: LevelSource | None = None
        self._level: list[AnyMessage] = []

    @property
    def latest(self) -> CompressionCheckpoint | None:
        return self.checkpoints[-1] if self.checkpoints else None

    def _require_source(self) -> LevelSource:
        if self._source is None:
            raise ValidationError("Compressor.load(...) must be called before compress/transform")
        return self._source

    async def load(self, source: LevelSource) -> None:
        """Read the current level and the checkpoints stored in it (this level only)."""
        self._source = source
        self._level = await source.level()
        self.checkpoints = checkpoints_in(self._level)

    def task_messages(self) -> list[AnyMessage]:
        """The loaded level's conversation (compression messages left out)."""
        return conversation(self._level)

    async def compress(self, reason: str = REASON) -> list[AnyMessage]:
        """One more round; returns the level's view after it. Writes nothing when the
        strategy finds nothing left to compress."""
        source = self._require_source()
        self._level = await source.level()
        self.checkpoints = checkpoints_in(self._level)
        plan = plan_compression(
            self.strategy, self._level, self.config, self.latest, self.token_counter
        )
        if plan is None:
            return self.view()
        if plan.to_summarize:
            plan.checkpoint.summary = await self.summarizer(plan.to_summarize, plan.previous_summary)
        await source.append_checkpoint(plan, reason)
        self.checkpoints.append(plan.checkpoint)
        return self.view()

    async def transform(self) -> list[AnyMessage]:
        """The view of the latest checkpoint over the level as it is now."""
        source = self._require_source()
        self._level = await source.level()
        return self.view()

    def view(self) -> list[AnyMessage]:
        return apply_checkpoint(self._level, self.latest, self.config.stub_text)
