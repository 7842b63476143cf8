"""The context window: the messages to send a model, with the account of how they were
chosen (`tasks.context(...)` returns one; docs/compression.md). A value: which messages
go in is decided in `mindstore.compression.window`, the request shapes are
`mindstore.compression.window_formats`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from mindstore.compression import window_formats
from mindstore.compression.checkpoint import CompressionCheckpoint
from mindstore.model.base import JSON
from mindstore.model.messages import AnyMessage

__all__ = ["ContextWindow", "LeftOut"]


@dataclass(frozen=True)
class LeftOut:
    """What of the level a window does not send, and why (the history keeps all of it)."""

    bookkeeping: int = 0
    """Level messages a model never sees (task configs, entries, exits, compression
    markers, informational messages not marked `is_visible_ai`, unknown roles)."""
    compressed: int = 0
    """Messages the checkpoint dropped; its summary stands in for them."""
    stubbed: int = 0
    """Tool results the checkpoint cut to a stub (they are sent, shortened)."""
    trimmed: int = 0
    """Older messages the token budget left out."""
    ui_parts: int = 0
    """UI-only parts taken out of the messages that were kept."""
    unpaired: tuple[str, ...] = ()
    """Tool call ids left out because their call or their result is not in the window."""
    truncated: str | None = None
    """The id of the message whose text was cut at the budget's edge, if any."""


@dataclass
class ContextWindow(Sequence[AnyMessage]):
    """The messages to send (a sequence: `len`, iteration, indexing), and how they were
    obtained: their token count, the checkpoint applied, what was left out and why."""

    messages: list[AnyMessage]
    tokens: int
    checkpoint: CompressionCheckpoint | None = None
    compressed_now: bool = False
    trimmed: bool = False
    scope: str | None = None
    notes: list[str] = field(default_factory=list)
    left_out: LeftOut = field(default_factory=LeftOut)

    @overload
    def __getitem__(self, index: int) -> AnyMessage: ...

    @overload
    def __getitem__(self, index: slice) -> list[AnyMessage]: ...

    def __getitem__(self, index: int | slice) -> AnyMessage | list[AnyMessage]:
        return self.messages[index]

    def __len__(self) -> int:
        return len(self.messages)

    def __iter__(self) -> Any:
        return iter(self.messages)

    # The window in the request shapes model APIs take (`window_formats`).
    def to_openai_chat(self) -> list[JSON]:
        """`client.chat.completions.create(messages=window.to_openai_chat(), ...)`."""
        return window_formats.to_openai_chat(self.messages)

    def to_responses(self) -> list[JSON]:
        """`client.responses.create(input=window.to_responses(), ...)`."""
        return window_formats.to_responses(self.messages)

    def to_anthropic(self) -> JSON:
        """`client.messages.create(**window.to_anthropic(), model=..., max_tokens=...)`."""
        return window_formats.to_anthropic(self.messages)

    def to_gemini(self) -> JSON:
        """`{"system_instruction": ..., "contents": [...]}` for Gemini's generateContent."""
        return window_formats.to_gemini(self.messages)
