"""What of a message is searchable (pure): its text and the tools it names.

Indexed: text parts, tool calls (the tool's name and the string and number values of
its arguments), tool results (their text, string and number values, error), informational
details, error messages, and a task entry's or exit's text parts. Not indexed: reasoning
and thinking (the model's scratchpad, which providers may ask not to show), images,
files and other media (bytes), configuration, compression checkpoints, metadata and ids.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from mindstore.model.messages import AnyMessage
from mindstore.model.parts import InformationalPart, TextPart, ToolCallPart, ToolResultPart

__all__ = ["Searchable", "searchable"]

MAX_CHARS = 64 * 1024
"""Text past this many characters of one message is not indexed (a huge tool result
would otherwise dominate the index); the index says so per message (`cut`)."""


@dataclass(frozen=True)
class Searchable:
    """A message's indexed text (parts joined by newlines) and the tool names it names."""

    text: str
    tools: tuple[str, ...]
    cut: bool = False


def _values(value: Any, depth: int = 0) -> Iterator[str]:
    """String and number leaves of a JSON value (keys left out: they are schema)."""
    if depth > 20:
        return
    if isinstance(value, str):
        yield value
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int | float):
        yield str(value)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _values(item, depth + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _values(item, depth + 1)


def searchable(message: AnyMessage) -> Searchable:
    """The searchable text and tool names of `message` (see the module doc)."""
    pieces: list[str] = []
    tools: list[str] = []
    for part in getattr(message, "content", None) or []:
        if isinstance(part, TextPart):
            pieces.append(part.text)
        elif isinstance(part, ToolCallPart):
            tools.append(part.tool_name)
            pieces.append(part.tool_name)
            pieces.extend(_values(part.args))
        elif isinstance(part, ToolResultPart):
            tools.append(part.tool_name)
            pieces.extend(_values(part.result))
            pieces.extend(c.text for c in part.tool_result_contents if c.text)
            if part.error:
                pieces.append(part.error)
        elif isinstance(part, InformationalPart) and part.details:
            pieces.append(part.details)
    error = getattr(message, "error_message", None)
    if isinstance(error, str) and error:
        pieces.append(error)
    text = "\n".join(p for p in pieces if p)
    cut = len(text) > MAX_CHARS
    return Searchable(text[:MAX_CHARS], tuple(dict.fromkeys(t for t in tools if t)), cut)
