"""The compression framework's extension point: `CompressionStrategy` and its base config.

The compression document defines a strategy as an object with a `strategy_type` and an
async `compress(task, new_checkpoint, config)` that fills the checkpoint and returns the
messages to send; `new_checkpoint=None` asks for the view only ("transform"). The three
built-in strategies are implementations of this class (`mindstore.compression.builtin`),
and so is any strategy an application writes: the `Compressor` and `tasks.context(...)`
treat them alike, and their checkpoints are stored and read back the same way.

`task` is whatever holds the level: an in-memory `mindstore.Task`, or a `LevelSnapshot`
of a stored task (the level read once, with the same `current_task_messages()` and
`find_current_task_boundaries()` methods). Strategies read it only through those two.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from mindstore.compression.checkpoint import CompressionCheckpoint, checkpoints_in
from mindstore.compression.checkpoint_view import DEFAULT_STUB_TEXT, apply_checkpoint
from mindstore.model.base import Model
from mindstore.model.messages import AnyMessage
from mindstore.model.parts import CompressionConfig, CompressionStrategyType


class BaseCompressionConfig(Model):
    """What every strategy's configuration has; a custom strategy subclasses it.

    `strategy` names a registered strategy type, so a config alone can pick its strategy
    (`Compressor(config=...)`). The built-in `CompressionConfig` (stored in a task config,
    its `strategy` typed with the built-in enum) has these fields too, so everything in
    the framework accepts either (`AnyCompressionConfig`). Unknown fields are kept, like
    every stored model.
    """

    enabled: bool = True
    token_limit: int = 200_000
    strategy: str | None = None
    stub_text: str = DEFAULT_STUB_TEXT


AnyCompressionConfig = BaseCompressionConfig | CompressionConfig


def strategy_name(value: CompressionStrategyType | str | Any) -> str:
    """The plain string a strategy type is stored as (enums by their value)."""
    return str(value.value) if isinstance(value, Enum) else str(value)


class TaskLevel(Protocol):
    """What a strategy may read from the `task` it is given."""

    def current_task_messages(self) -> list[AnyMessage]: ...

    def find_current_task_boundaries(self) -> tuple[int | None, int | None]: ...


@dataclass
class LevelSnapshot:
    """The current level of a stored task, as read for one compression round.

    Stands in for the in-memory `Task` the compression document's strategies expect, so a
    strategy written against `task.current_task_messages()` runs on a stored task without
    loading the whole document.
    """

    id: str
    messages: list[AnyMessage] = field(default_factory=list)
    boundaries: tuple[int | None, int | None] = (None, None)

    def current_task_messages(self) -> list[AnyMessage]:
        return list(self.messages)

    def find_current_task_boundaries(self) -> tuple[int | None, int | None]:
        return self.boundaries


class CompressionStrategy(ABC):
    """One way of compressing a task level (the compression document's interface).

    `compress` must read the level through `task.current_task_messages()` (never the
    whole message list: nested sub-tasks are other levels). With a checkpoint, it records
    in it what this round compresses: `compressed_message_ids`, optionally
    `metadata["stubbed_message_ids"]` (tool results kept in place as stubs, a subset of
    the compressed ids), `summary` (stands in for the dropped ones) and
    `metadata["summary_after_id"]`. Without one (`None`) it only returns the view.

    The `Compressor` merges the round into the level's previous checkpoint (checkpoints
    are cumulative) and writes nothing when the round compressed nothing new. The view the
    store serves afterwards is `view()` of the merged checkpoint; a strategy that returns
    `self.view(task, config)` for `None` is consistent with it by construction.
    """

    @property
    @abstractmethod
    def strategy_type(self) -> CompressionStrategyType | str:
        """The registry key, stored in each checkpoint this strategy writes."""

    @abstractmethod
    async def compress(
        self,
        task: TaskLevel,
        new_checkpoint: CompressionCheckpoint | None,
        config: AnyCompressionConfig,
    ) -> list[AnyMessage]:
        """Fill `new_checkpoint` (if given) and return the level's messages to send."""

    # helpers for implementations -----------------------------------------------------
    @staticmethod
    def latest_checkpoint(task: TaskLevel) -> CompressionCheckpoint | None:
        """The level's latest stored checkpoint (cumulative: it is all a view needs)."""
        found = checkpoints_in(task.current_task_messages())
        return found[-1] if found else None

    def view(
        self,
        task: TaskLevel,
        config: AnyCompressionConfig,
        checkpoint: CompressionCheckpoint | None = None,
    ) -> list[AnyMessage]:
        """The level with `checkpoint` (default: the latest stored one) applied."""
        chosen = checkpoint if checkpoint is not None else self.latest_checkpoint(task)
        stub_text = getattr(config, "stub_text", None) or DEFAULT_STUB_TEXT
        return apply_checkpoint(task.current_task_messages(), chosen, stub_text)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(strategy_type={strategy_name(self.strategy_type)!r})"
