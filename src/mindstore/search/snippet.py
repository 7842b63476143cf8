"""Snippets (pure): the part of a message's text around the query's words, marked.

Made at read time from the message's text (decrypted under a keyring), never stored: a
redacted message has no text left to show. The window is the one of about
`WIDTH` characters that holds the most distinct query terms (then the most hits),
widened to word boundaries; highlights are spans of the snippet.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from .tokenize import Stemmer, tokens

__all__ = ["WIDTH", "Snippet", "make_snippet", "phrase_at"]

WIDTH = 160


@dataclass(frozen=True)
class Snippet:
    """`text` (an excerpt, "…" where cut) and `highlights`, its spans `[start, end)` of
    query words."""

    text: str
    highlights: tuple[tuple[int, int], ...]

    def marked(self, before: str = "**", after: str = "**") -> str:
        """The text with each highlight wrapped in `before` / `after`."""
        out, at = [], 0
        for start, end in self.highlights:
            out += [self.text[at:start], before, self.text[start:end], after]
            at = end
        out.append(self.text[at:])
        return "".join(out)


def phrase_at(words: list[str], phrase: tuple[str, ...]) -> bool:
    """Whether the terms of `phrase` occur next to each other, in order, in `words`."""
    size = len(phrase)
    return any(tuple(words[i : i + size]) == phrase for i in range(len(words) - size + 1))


def make_snippet(
    text: str, query_terms: Collection[str], stem: Stemmer | None = None, width: int = WIDTH
) -> Snippet:
    """The best window of `text` for `query_terms` (see the module doc)."""
    found = [t for t in tokens(text, stem) if t.term in query_terms]
    if not found:
        cut = text[:width]
        return Snippet(cut + ("…" if len(text) > width else ""), ())
    best, best_key = 0, (-1, -1)
    for i, first in enumerate(found):
        inside = [t for t in found[i:] if t.end - first.start <= width]
        key = (len({t.term for t in inside}), len(inside))
        if key > best_key:
            best, best_key = i, key
    first = found[best]
    slack = max(0, (width - (found[best].end - first.start)) // 3)
    start = max(0, first.start - slack)
    while start > 0 and not text[start - 1].isspace() and first.start - start < slack + 20:
        start -= 1
    end = min(len(text), start + width)
    while end < len(text) and not text[end].isspace() and end - start < width + 20:
        end += 1
    prefix = "…" if start > 0 else ""
    body = text[start:end]
    shift = len(prefix) - start
    spans: list[tuple[int, int]] = []
    for t in found:
        if t.start < start or t.end > end:
            continue
        if spans and t.start + shift <= spans[-1][1]:  # CJK bigrams overlap: one span
            spans[-1] = (spans[-1][0], max(spans[-1][1], t.end + shift))
        else:
            spans.append((t.start + shift, t.end + shift))
    return Snippet(prefix + body + ("…" if end < len(text) else ""), tuple(spans))
