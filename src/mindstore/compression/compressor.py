"""The compression document's `Compressor`: load a level's checkpoints, compress, transform.

The only compression module that does I/O, and only through a `LevelSource`: a stored
task (`StoredLevel`, which appends checkpoints with the repository's atomic append) or an
in-memory `Task` (`MemoryLevel`; `load(task)` wraps one itself). The strategy is any
`CompressionStrategy` object, or a type looked up in a registry; the Compressor merges
what a round records into the level's cumulative checkpoint, so every strategy's
checkpoints are stored, read back and served by `tasks.context(...)` the same way.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol

from mindstore.compression.base import (
    AnyCompressionConfig,
    CompressionStrategy,
    LevelSnapshot,
    TaskLevel,
    strategy_name,
)
from mindstore.compression.checkpoint import (
    SPAN_KEY,
    STRATEGY_KEY,
    CompressionCheckpoint,
    checkpoints_in,
    merge_round,
)
from mindstore.compression.checkpoint_view import DEFAULT_STUB_TEXT, apply_checkpoint
from mindstore.compression.registry import (
    StrategyArgument,
    StrategyRegistry,
    resolve_strategy,
)
from mindstore.compression.strategies import conversation
from mindstore.compression.summarizer import Summarizer
from mindstore.compression.tokens import TokenCounter, estimate_tokens
from mindstore.errors import ValidationError
from mindstore.model.messages import AnyMessage
from mindstore.model.parts import CompressionConfig

if TYPE_CHECKING:
    from mindstore.model.task import Task
    from mindstore.repositories.tasks import TaskRepository

REASON = "compression"


class LevelSource(Protocol):
    """The current level of one task, and a way to append a checkpoint to it."""

    async def snapshot(self) -> TaskLevel: ...

    async def append_checkpoint(
        self, checkpoint: CompressionCheckpoint, reason: str
    ) -> AnyMessage: ...


def _compression_args(checkpoint: CompressionCheckpoint, reason: str) -> dict[str, Any]:
    start, end = checkpoint.metadata[SPAN_KEY]
    return {
        "start_idx": start,
        "end_idx": end,
        "reason": reason,
        "strategies": [checkpoint.metadata[STRATEGY_KEY]],
        "compressed_message_ids": list(checkpoint.compressed_message_ids),
        "kept_message_ids": list(checkpoint.kept_message_ids),
        "cache": checkpoint.cache(),
        "metadata": checkpoint.message_metadata(),
    }


class StoredLevel:
    """The current level of a stored task; checkpoints go in with one atomic append."""

    def __init__(self, tasks: TaskRepository, task_id: str) -> None:
        self.tasks = tasks
        self.task_id = task_id

    async def snapshot(self) -> LevelSnapshot:
        """The level and its boundaries from one header read (two round trips in all)."""
        header = await self.tasks.header(self.task_id)
        start = header.scope_stack[-1].index if header.scope_stack else 0
        messages = await self.tasks.level_messages(self.task_id, header.current_scope)
        return LevelSnapshot(self.task_id, messages, (start, None))

    async def level(self) -> list[AnyMessage]:
        return await self.tasks.current_task_messages(self.task_id)

    async def append_checkpoint(self, checkpoint: CompressionCheckpoint, reason: str) -> AnyMessage:
        return await self.tasks.add_compression_message(
            self.task_id, **_compression_args(checkpoint, reason)
        )


class MemoryLevel:
    """The current level of an in-memory `Task` (the object the document's strategies run on)."""

    def __init__(self, task: Task) -> None:
        self.task = task

    async def snapshot(self) -> Task:
        return self.task

    async def level(self) -> list[AnyMessage]:
        return self.task.current_task_messages()

    async def append_checkpoint(self, checkpoint: CompressionCheckpoint, reason: str) -> AnyMessage:
        return self.task.add_compression_message(**_compression_args(checkpoint, reason))


def _as_source(target: Any) -> LevelSource:
    from mindstore.model.task import Task

    if isinstance(target, Task):
        return MemoryLevel(target)
    if callable(getattr(target, "snapshot", None)) and callable(
        getattr(target, "append_checkpoint", None)
    ):
        source: LevelSource = target  # duck-typed: any object with the two methods
        return source
    raise ValidationError(
        f"task: expected a mindstore.Task, StoredLevel or MemoryLevel, got {type(target).__name__}"
    )


class Compressor:
    """Compress one task level with one strategy (the compression document's Compressor).

    `load` reads the level's checkpoints; `compress` runs one more round, merges it into
    the level's cumulative checkpoint, appends it (messages are never deleted) and returns
    the view the store serves from then on; `transform` asks the strategy for the view of
    the latest checkpoint without writing. `get_task_messages`, `get_task_boundaries` and
    `get_compression_messages_in_task` are the document's helpers over the loaded level.
    """

    def __init__(
        self,
        strategy: StrategyArgument = None,
        config: AnyCompressionConfig | None = None,
        *,
        summarizer: Summarizer | None = None,
        token_counter: TokenCounter = estimate_tokens,
        registry: StrategyRegistry | None = None,
    ) -> None:
        self.config: AnyCompressionConfig = config if config is not None else CompressionConfig()
        self.strategy: CompressionStrategy = resolve_strategy(
            strategy,
            self.config,
            summarizer=summarizer,
            token_counter=token_counter,
            registry=registry,
        )
        self.checkpoints: list[CompressionCheckpoint] = []
        self._source: LevelSource | None = None
        self._task: TaskLevel | None = None
        self.logger = logging.getLogger(__name__)

    @property
    def latest(self) -> CompressionCheckpoint | None:
        return self.checkpoints[-1] if self.checkpoints else None

    @property
    def strategy_type(self) -> str:
        return strategy_name(self.strategy.strategy_type)

    @property
    def task(self) -> TaskLevel:
        """What the strategy reads: the in-memory Task, or the stored level's snapshot."""
        if self._task is None:
            raise ValidationError("Compressor.load(task) must be called before compress/transform")
        return self._task

    def _require_source(self) -> LevelSource:
        if self._source is None:
            raise ValidationError("Compressor.load(task) must be called before compress/transform")
        return self._source

    async def _refresh(self) -> TaskLevel:
        self._task = await self._require_source().snapshot()
        self.checkpoints = checkpoints_in(self._task.current_task_messages())
        return self._task

    async def load(self, task: Task | LevelSource) -> None:
        """Read the current level and its checkpoints (this level only).

        `task` is an in-memory `mindstore.Task`, or a `StoredLevel(acme.tasks, task_id)`.
        """
        self._source = _as_source(task)
        await self._refresh()
        self.logger.debug(
            "loaded %d compression checkpoints from the current task level", len(self.checkpoints)
        )

    # ---------------------------------------------------------------- document helpers
    def get_task_messages(self) -> list[AnyMessage]:
        """Every message of the loaded level, compression messages included."""
        return self.task.current_task_messages()

    def get_task_boundaries(self) -> tuple[int | None, int | None]:
        """(start, end) of the loaded level in the whole task; end is None while open."""
        return self.task.find_current_task_boundaries()

    def get_compression_messages_in_task(self) -> list[AnyMessage]:
        return [m for m in self.get_task_messages() if getattr(m, "role", None) == "compression"]

    def task_messages(self) -> list[AnyMessage]:
        """The loaded level's conversation (compression messages left out)."""
        return conversation(self.get_task_messages()) if self._task is not None else []

    # ---------------------------------------------------------------- rounds
    async def compress(self, reason: str = REASON) -> list[AnyMessage]:
        """One more round; returns the level's view after it. Writes nothing when the
        strategy finds nothing new to compress."""
        source = self._require_source()
        task = await self._refresh()
        level = task.current_task_messages()
        conv = conversation(level)
        candidate = CompressionCheckpoint(checkpoint_id=conv[-1].id if conv else "")
        await self.strategy.compress(task, candidate, self.config)
        merged = merge_round(self.latest, candidate, conv, self.strategy_type)
        if merged is None:
            return self.view()
        await source.append_checkpoint(merged, reason)
        self.checkpoints.append(merged)
        return self.view()  # The compression message itself is never part of a view

    async def transform(self) -> list[AnyMessage]:
        """The strategy's view of the latest checkpoint over the level as it is now."""
        task = await self._refresh()
        return await self.strategy.compress(task, None, self.config)

    def view(self) -> list[AnyMessage]:
        """The loaded level with its latest checkpoint applied (what the store serves)."""
        stub_text = getattr(self.config, "stub_text", None) or DEFAULT_STUB_TEXT
        return apply_checkpoint(
            self.get_task_messages() if self._task else [], self.latest, stub_text
        )
