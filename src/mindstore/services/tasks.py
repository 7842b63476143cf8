"""The tenant's task API: the repository's verbs and reads, plus the context window.

`TaskRepository` stores and reads; the context window is built *on* it (compression reads
levels and writes checkpoints through the repository), so it cannot live inside it
without an import cycle. `TaskService` is the class `acme.tasks` actually is: the
repository with `context()` added on top, which keeps `acme.tasks.context(...)` where the
README shows it.
"""

from __future__ import annotations

from mindstore.compression.context import ContextWindow, build_context
from mindstore.compression.registry import StrategyArgument
from mindstore.compression.summarizer import Summarizer
from mindstore.compression.tokens import TokenCounter, estimate_tokens
from mindstore.repositories.tasks import TaskRepository
from mindstore.validation import check_bool, check_int, check_optional_int


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
        compressed first; `max_tokens` then trims the view (the dialog document's context
        manager) without touching the stored history. See docs/compression.md.
        """
        check_optional_int(max_tokens, "max_tokens", minimum=1)
        check_int(safety_buffer, "safety_buffer")
        check_bool(auto_compress, "auto_compress")
        return await build_context(
            self, task_id, max_tokens=max_tokens, strategy=strategy, summarizer=summarizer,
            token_counter=token_counter or estimate_tokens, auto_compress=auto_compress,
            safety_buffer=safety_buffer,
        )  # fmt: skip
