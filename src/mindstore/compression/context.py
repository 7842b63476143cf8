"""`tasks.context(...)`: the messages to send to the model for a task's current level.

The level is filtered on the server (pipelines/context.py): other levels, compression
bookkeeping, dropped messages and the bodies of stubbed tool results never travel. Then:
1. auto-compression: if the level's compression config is enabled and the view passes
   its `token_limit`, one compression round runs first (and is stored), with the
   strategy the config names or the `strategy=` argument (a type or any
   `CompressionStrategy` object);
2. if `max_tokens` is given, the dialog document's default manager fits the view into
   it (the stored history is not touched).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mindstore import formats
from mindstore.compression.checkpoint import CompressionCheckpoint
from mindstore.compression.compressor import Compressor, StoredLevel
from mindstore.compression.managers import DefaultContextManager
from mindstore.compression.registry import StrategyArgument, resolve_strategy
from mindstore.compression.summarizer import Summarizer
from mindstore.compression.tokens import TokenCounter, count_tokens, estimate_tokens
from mindstore.compression.view import apply_checkpoint
from mindstore.errors import NotFound
from mindstore.model.base import JSON
from mindstore.model.messages import AnyMessage
from mindstore.model.parts import CompressionConfig

if TYPE_CHECKING:
    from mindstore.repositories.records import CheckpointRecord
    from mindstore.repositories.tasks import TaskRepository


@dataclass
class ContextWindow:
    """What to send, and how it was obtained."""

    messages: list[AnyMessage]
    tokens: int
    checkpoint: CompressionCheckpoint | None = None
    compressed_now: bool = False
    trimmed: bool = False
    scope: str | None = None
    notes: list[str] = field(default_factory=list)

    # The window in the formats model APIs take (mindstore.formats): only what the model
    # must see, with tool results' `terminate` flags and metadata left behind.
    def to_openai_chat(self) -> list[JSON]:
        """`client.chat.completions.create(messages=window.to_openai_chat(), ...)`."""
        return formats.to_openai_chat(self.messages)

    def to_responses(self) -> list[JSON]:
        """`client.responses.create(input=window.to_responses(), ...)`."""
        return formats.to_responses(self.messages)

    def to_anthropic(self) -> JSON:
        """`client.messages.create(**window.to_anthropic(), model=..., max_tokens=...)`."""
        return formats.to_anthropic(self.messages)

    def to_gemini(self) -> JSON:
        """`{"system_instruction": ..., "contents": [...]}` for Gemini's generateContent."""
        return formats.to_gemini(self.messages)


def checkpoint_from_record(record: CheckpointRecord | None) -> CompressionCheckpoint | None:
    if record is None:
        return None
    summary = record.cache.get("summary")
    return CompressionCheckpoint(
        checkpoint_id=record.checkpoint_id,
        timestamp=int(record.timestamp),
        compressed_message_ids=record.compressed_message_ids,
        kept_message_ids=record.kept_message_ids,
        metadata=record.metadata,
        summary=summary if isinstance(summary, str) else None,
    )


async def level_compression_config(tasks: TaskRepository, task_id: str) -> CompressionConfig:
    """The compression config of the current level's task config (defaults without one)."""
    try:
        return (await tasks.current_task_config(task_id)).compression_config
    except NotFound:
        return CompressionConfig()


async def build_context(
    tasks: TaskRepository,
    task_id: str,
    *,
    max_tokens: int | None = None,
    strategy: StrategyArgument = None,
    summarizer: Summarizer | None = None,
    token_counter: TokenCounter = estimate_tokens,
    auto_compress: bool = True,
    safety_buffer: int = 0,
) -> ContextWindow:
    config = await level_compression_config(tasks, task_id)
    chosen = resolve_strategy(strategy, config, summarizer=summarizer, token_counter=token_counter)
    header, record, messages = await tasks.context_source(task_id)
    checkpoint = checkpoint_from_record(record)
    view = apply_checkpoint(messages, checkpoint, config.stub_text)
    window = ContextWindow(view, count_tokens(view, token_counter), checkpoint,
                           scope=header.current_scope)  # fmt: skip
    if auto_compress and config.enabled and window.tokens > config.token_limit:
        compressor = Compressor(chosen, config)
        await compressor.load(StoredLevel(tasks, task_id))
        before = len(compressor.checkpoints)
        window.messages = await compressor.compress()
        window.checkpoint = compressor.latest
        window.compressed_now = len(compressor.checkpoints) > before
        window.tokens = count_tokens(window.messages, token_counter)
        if not window.compressed_now:
            window.notes.append(f"over token_limit but {compressor.strategy_type} found nothing to compress")
    if max_tokens is not None and window.tokens > max_tokens - safety_buffer:
        manager = DefaultContextManager(max_tokens=max_tokens, safety_buffer=safety_buffer, counter=token_counter)
        window.messages = manager(window.messages)
        window.tokens = count_tokens(window.messages, token_counter)
        window.trimmed = True
    return window
