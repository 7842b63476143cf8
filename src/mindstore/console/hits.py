"""Search hits as the results page shows them (pure): each snippet cut into plain and
highlighted pieces.

The page wraps a highlighted piece in `<mark>` itself and autoescapes every piece, so the
highlights come from the snippet's spans, never from markup inside stored text: a message
holding `<mark>` or `<script>` shows those characters, as text.
"""

from __future__ import annotations

from dataclasses import dataclass

from mindstore.search import Snippet

__all__ = ["Piece", "pieces"]


@dataclass(frozen=True)
class Piece:
    """A run of a snippet's text, highlighted (a query word) or not."""

    text: str
    marked: bool


def pieces(snippet: Snippet) -> tuple[Piece, ...]:
    """The snippet's text as pieces whose concatenation is the text, the highlights marked.

    Spans are clipped to the text and to what earlier spans left, so out-of-order,
    overlapping or out-of-range spans can neither repeat nor lose a character.
    """
    text = snippet.text
    out: list[Piece] = []
    at = 0
    for start, end in snippet.highlights:
        start, end = max(start, at), min(end, len(text))
        if end <= start:
            continue
        if start > at:
            out.append(Piece(text[at:start], False))
        out.append(Piece(text[start:end], True))
        at = end
    if at < len(text):
        out.append(Piece(text[at:], False))
    return tuple(out)
