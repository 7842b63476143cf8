"""Summaries of dropped history: an async, pluggable call with an offline default.

Production summaries come from an LLM; the store must not depend on one, and tests must be
deterministic. Any async callable `(messages, previous_summary) -> str` is a summarizer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from mindstore.model.messages import AnyMessage


class Summarizer(Protocol):
    async def __call__(self, messages: Sequence[AnyMessage], previous: str | None) -> str:
        """A summary of `messages`, folding in the summary they continue (if any)."""
        ...


def _gist(message: AnyMessage, width: int) -> str:
    role = getattr(message, "role", None) or "unknown"
    text = " ".join(message.text().split()) if hasattr(message, "text") else ""
    if not text:
        kinds = sorted({getattr(p, "type", "?") for p in getattr(message, "content", [])})
        text = f"<{', '.join(kinds) or 'empty'}>"
    return f"{role}: {text[:width]}{'…' if len(text) > width else ''}"


class ExtractiveSummarizer:
    """Deterministic default: a line per message (role and the start of its text).

    Not a real summary, but stable, offline and bounded: `max_chars` caps the result, so
    stacked rounds never grow without limit (the oldest lines fall off first).
    """

    def __init__(self, line_width: int = 80, max_chars: int = 4000) -> None:
        self.line_width = line_width
        self.max_chars = max_chars

    async def __call__(self, messages: Sequence[AnyMessage], previous: str | None) -> str:
        lines = previous.splitlines()[1:] if previous else []
        lines += [_gist(message, self.line_width) for message in messages]
        while lines and sum(len(line) + 1 for line in lines) > self.max_chars:
            lines.pop(0)
        return "\n".join([f"Summary of earlier conversation ({len(lines)} items):", *lines])
