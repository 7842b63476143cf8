"""The tenant's task API: the repository's verbs and reads, plus the context window.

`TaskRepository` (a facade over its port, writer and reads, docs/architecture.md "The task
repository") stores and reads; the context window is built *on* it (compression reads
levels through the repository's port and writes checkpoints through its verbs), so it
cannot live inside it without an import cycle. `TaskService` is the class `acme.tasks`
actually is: the repository with `context()` and `stream()` added, two thin entries to
`compression.context.build_context` and `repositories.streaming.MessageStream`, which
keeps `acme.tasks.context(...)` where the README shows it. The one level of inheritance
is the whole chain: the repository itself has no base class.
"""

from __future__ import annotations

from mindstore.compression.context import ContextWindow, build_context
from mindstore.compression.registry import StrategyArgument
from mindstore.compression.summarizer import Summarizer
from mindstore.compression.tokens import TokenCounter, estimate_tokens
from mindstore.operations import operations
from mindstore.repositories.streaming import MessageStream
from mindstore.repositories.tasks import TaskRepository
from mindstore.validation import check_bool, check_int, check_optional_int


@operations("tasks")
class TaskService(TaskRepository):
    """`acme.tasks`: every verb and read of `TaskRepository`, and `context()`."""

    async def context(
        self,
        task_id: str,
        *,
        max_tokens: int | None = None,
        strategy: StrategyArgument = None,
        summarizer: Summarizer | None = None,
        token_counter: TokenCounter | None = None,
        auto_compress: bool = True,
        safety_buffer: int = 0,
    ) -> ContextWindow:
        """The messages to send to the model for the current level (a `ContextWindow`).

        Filtering runs on the server; a level past its `CompressionConfig.token_limit` is
        compressed first (a checkpoint is written); `max_tokens` then trims the view without
        touching the stored history. See docs/compression.md.

        Args:
            task_id: The task.
            max_tokens: Trim the view to at most this many tokens (None: no trim).
            strategy: The compression strategy: a name, a strategy object or a list of them
                (None: the level's config, else the default).
            summarizer: Writes summaries for strategies that summarize (None: a placeholder).
            token_counter: Counts a message's tokens (default: an estimate from its length).
            auto_compress: Compress a level past its token limit before reading.
            safety_buffer: Tokens kept free below `max_tokens`.

        Returns:
            The `ContextWindow`: a sequence of the messages to send, with their `tokens`,
            the checkpoint applied and what was left out.

        Raises:
            NotFound: No such task in this view.
            ValidationError: A bad bound, strategy or flag.

        Example:
            ```python
            window = await acme.tasks.context(task.id, max_tokens=32_000)
            client.chat.completions.create(model="gpt-4o", messages=window.to_openai_chat())
            ```
        """
        check_optional_int(max_tokens, "max_tokens", minimum=1)
        check_int(safety_buffer, "safety_buffer")
        check_bool(auto_compress, "auto_compress")
        return await build_context(
            self, task_id, max_tokens=max_tokens, strategy=strategy, summarizer=summarizer,
            token_counter=token_counter or estimate_tokens, auto_compress=auto_compress,
            safety_buffer=safety_buffer,
        )  # fmt: skip

    # ------------------------------------------------------------------ streaming
    def stream(self, task_id: str, message_id: str | None = None, *, flush_ms: int = 200,
               flush_bytes: int = 1024) -> MessageStream:  # fmt: skip
        """Write a model's streamed deltas into one message, coalesced.

        `async with tasks.stream(task_id, message_id) as s: await s.text(delta)`: deltas are
        written at most every `flush_ms` or `flush_bytes`, each flush one guarded update.
        docs/streaming.md.

        Args:
            task_id: The task.
            message_id: The open assistant message to fill; None starts a new one.
            flush_ms: Write at most this often (milliseconds).
            flush_bytes: Or when this many bytes are pending.

        Returns:
            A `MessageStream` (an async context manager).

        Example:
            ```python
            async with acme.tasks.stream(task.id) as s:
                async for delta in model_stream:
                    await s.text(delta)
            ```
        """
        return MessageStream(self, task_id, message_id, flush_ms=flush_ms, flush_bytes=flush_bytes)
