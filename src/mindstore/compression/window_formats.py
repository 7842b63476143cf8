"""A context window in the request shapes of the model APIs: what `ContextWindow`'s
``to_openai_chat()``, ``to_responses()``, ``to_anthropic()`` and ``to_gemini()`` return.

The conversions themselves are `mindstore.formats`' (pure, one module per provider,
docs/formats.md); a window hands over exactly its messages, so what a provider receives
is what the window's accounting (tokens, what was left out) describes.
"""

from __future__ import annotations

from collections.abc import Sequence

from mindstore import formats
from mindstore.model.base import JSON
from mindstore.model.messages import AnyMessage

__all__ = ["to_anthropic", "to_gemini", "to_openai_chat", "to_responses"]


def to_openai_chat(messages: Sequence[AnyMessage]) -> list[JSON]:
    """`client.chat.completions.create(messages=...)`'s list."""
    return formats.to_openai_chat(messages)


def to_responses(messages: Sequence[AnyMessage]) -> list[JSON]:
    """`client.responses.create(input=...)`'s list."""
    return formats.to_responses(messages)


def to_anthropic(messages: Sequence[AnyMessage]) -> JSON:
    """`client.messages.create(**...)`'s `system` and `messages`."""
    return formats.to_anthropic(messages)


def to_gemini(messages: Sequence[AnyMessage]) -> JSON:
    """`{"system_instruction": ..., "contents": [...]}` for Gemini's generateContent."""
    return formats.to_gemini(messages)
