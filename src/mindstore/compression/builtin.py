"""The three built-in strategies as `CompressionStrategy` objects.

The decisions are the pure planning of `mindstore.compression.strategies`; these classes
only add what the interface needs: the async summary of what a round drops, and filling
the checkpoint the `Compressor` hands them. A stored task and an in-memory `Task` run the
same code, so they compress identically.
"""

from __future__ import annotations

from typing import ClassVar

from mindstore.compression.base import (
    AnyCompressionConfig,
    CompressionStrategy,
    TaskLevel,
)
from mindstore.compression.checkpoint import CompressionCheckpoint
from mindstore.compression.strategies import plan_compression
from mindstore.compression.summarizer import ExtractiveSummarizer, Summarizer
from mindstore.compression.tokens import TokenCounter, estimate_tokens
from mindstore.model.messages import AnyMessage
from mindstore.model.parts import CompressionConfig, CompressionStrategyType

CHECKPOINT_FIELDS = (
    "checkpoint_id",
    "compressed_message_ids",
    "kept_message_ids",
    "metadata",
    "summary",
)


def builtin_config(
    config: AnyCompressionConfig | None, kind: CompressionStrategyType
) -> CompressionConfig:
    """The built-in planner's config from any config: its own fields where given, the
    built-in defaults for the rest (a custom config need not know `keep_recent_messages`)."""
    if isinstance(config, CompressionConfig):
        return config
    data = config.model_dump() if config is not None else {}
    data["strategy"] = kind
    return CompressionConfig.model_validate({k: v for k, v in data.items() if v is not None})


class PlannedStrategy(CompressionStrategy):
    """A built-in strategy: plan with the pure planner, summarise what it drops."""

    kind: ClassVar[CompressionStrategyType]

    def __init__(
        self, summarizer: Summarizer | None = None, token_counter: TokenCounter = estimate_tokens
    ) -> None:
        self.summarizer: Summarizer = summarizer or ExtractiveSummarizer()
        self.token_counter = token_counter

    @property
    def strategy_type(self) -> CompressionStrategyType:
        return self.kind

    async def compress(
        self,
        task: TaskLevel,
        new_checkpoint: CompressionCheckpoint | None,
        config: AnyCompressionConfig,
    ) -> list[AnyMessage]:
        own = builtin_config(config, self.kind)
        previous = self.latest_checkpoint(task)
        if new_checkpoint is None:
            return self.view(task, own, previous)
        plan = plan_compression(
            self.kind, task.current_task_messages(), own, previous, self.token_counter
        )
        if plan is None:  # nothing left: the checkpoint stays empty and nothing is written
            return self.view(task, own, previous)
        if plan.to_summarize:
            plan.checkpoint.summary = await self.summarizer(
                plan.to_summarize, plan.previous_summary
            )
        for name in CHECKPOINT_FIELDS:
            setattr(new_checkpoint, name, getattr(plan.checkpoint, name))
        return self.view(task, own, new_checkpoint)


class ToolCompression(PlannedStrategy):
    """Stub old tool results in place (no summary)."""

    kind = CompressionStrategyType.tool_compression


class TruncateAndSummarize(PlannedStrategy):
    """Drop the oldest messages until the level is `target_ratio` of `token_limit`."""

    kind = CompressionStrategyType.truncate_and_summarize


class CompactSummarization(PlannedStrategy):
    """Summarise everything between the head and the most recent turns."""

    kind = CompressionStrategyType.compact_summarization


BUILTIN_STRATEGIES: tuple[type[PlannedStrategy], ...] = (
    ToolCompression,
    TruncateAndSummarize,
    CompactSummarization,
)
