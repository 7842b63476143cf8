"""Text -> search terms (pure): the one normalisation the index and the queries share.

A term is a run of letters and digits (Unicode categories L* and N*) after NFKC,
case folding and accent stripping, so "Café", "CAFE" and its full-width form are one term. Scripts
written without spaces (Han, Hiragana, Katakana) have no word boundaries to find without
a dictionary: each run of them becomes its overlapping character bigrams ("東京都" ->
"東京", "京都"), the scheme Lucene's CJK analyzer uses, so a query finds any text that
holds its bigrams. English stemming (Snowball) is optional, per tenant.

Every term keeps the span of the original text it came from, for snippets.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise

__all__ = [
    "MAX_TERM",
    "STEMMING_LANGUAGES",
    "Stemmer",
    "Token",
    "normalise",
    "stemmer_for",
    "terms",
    "tokens",
]

MAX_TERM = 40
"""Longer runs (base64, hashes) are cut to this many characters: still findable by their
start, and the index entry stays small."""

Stemmer = Callable[[str], str]
"""A term -> its stem (applied to alphabetic, non-CJK terms only)."""

_ASCII_WORD = re.compile(r"[a-z0-9]+")
_CJK_RANGES = (
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x31F0, 0x31FF),  # Katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xF900, 0xFAFF),  # compatibility ideographs
    (0x20000, 0x2FA1F),  # extensions B-F, compatibility supplement
)


def _is_cjk(char: str) -> bool:
    point = ord(char)
    return any(low <= point <= high for low, high in _CJK_RANGES)


@lru_cache(maxsize=65536)
def _fold(char: str) -> str:
    """One character of the original text, normalised: NFKC, casefold, accents stripped;
    each resulting character is kept when it is a letter or digit, else it becomes a
    space (a separator). A compatibility character may become several ("ﬁ" -> "fi")."""
    out = []
    for piece in unicodedata.normalize("NFKC", char).casefold():
        for base in unicodedata.normalize("NFD", piece):
            category = unicodedata.category(base)
            if category == "Mn":
                continue  # a combining accent: stripped
            out.append(base if category[0] in "LN" else " ")
    return "".join(out)


def normalise(text: str) -> str:
    """The folded text (letters and digits, everything else a space)."""
    return "".join(_fold(char) for char in text)


@dataclass(frozen=True, slots=True)
class Token:
    """A term and the span `[start, end)` of the original text it came from."""

    term: str
    start: int
    end: int


def _ascii_tokens(text: str, offset: int = 0) -> Iterator[Token]:
    for match in _ASCII_WORD.finditer(text.lower()):
        yield Token(match.group()[:MAX_TERM], offset + match.start(), offset + match.end())


_PIECE = re.compile(r"\S+")


def _mixed_tokens(text: str) -> Iterator[Token]:
    """Whitespace separates in every script, so each piece between spaces is read alone:
    the ASCII ones by a regex, the others character by character."""
    for match in _PIECE.finditer(text):
        piece = match.group()
        if piece.isascii():
            yield from _ascii_tokens(piece, match.start())
        else:
            for token in _unicode_tokens(piece):
                yield Token(token.term, match.start() + token.start, match.start() + token.end)


def tokens(text: str, stem: Stemmer | None = None) -> list[Token]:
    """The terms of `text` in order, with their spans (see the module doc)."""
    found = list(_ascii_tokens(text) if text.isascii() else _mixed_tokens(text))
    if stem is None:
        return found
    return [Token(_stemmed(t.term, stem), t.start, t.end) for t in found]


def _stemmed(term: str, stem: Stemmer) -> str:
    if term.isalpha() and not _is_cjk(term[0]):
        return stem(term)
    return term


def _unicode_tokens(text: str) -> Iterator[Token]:
    word: list[str] = []
    span = [0, 0]  # the current word's [start, end) in the original text
    cjk: list[tuple[str, int]] = []  # (char, its original index)

    def flush_word() -> Iterator[Token]:
        if word:
            yield Token("".join(word)[:MAX_TERM], span[0], span[1])
            word.clear()

    def flush_cjk() -> Iterator[Token]:
        if len(cjk) == 1:
            char, at = cjk[0]
            yield Token(char, at, at + 1)
        for (first, at), (second, last) in pairwise(cjk):
            yield Token(first + second, at, last + 1)
        cjk.clear()

    for index, char in enumerate(text):
        for folded in _fold(char):
            if folded == " ":
                yield from flush_word()
                yield from flush_cjk()
            elif _is_cjk(folded):
                yield from flush_word()
                cjk.append((folded, index))
            else:
                yield from flush_cjk()
                if not word:
                    span[0] = index
                word.append(folded)
                span[1] = index + 1
    yield from flush_word()
    yield from flush_cjk()


_WORD = re.compile(r"[^\W_]+")
_CJK_RUN = re.compile(
    "([" + "".join(f"\\U{low:08x}-\\U{high:08x}" for low, high in _CJK_RANGES) + "]+)"
)


def terms(text: str, stem: Stemmer | None = None) -> list[str]:
    """The terms of `text`, in order (with repeats): what the index stores and a query
    asks for. The whole text is normalised at once (no spans: `tokens` keeps them)."""
    if text.isascii():
        found = [word[:MAX_TERM] for word in _ASCII_WORD.findall(text.lower())]
    else:
        folded = unicodedata.normalize("NFKC", text).casefold()
        decomposed = unicodedata.normalize("NFD", folded)
        if decomposed != folded:
            folded = "".join(c for c in decomposed if unicodedata.category(c) != "Mn")
        found = []
        for word in _WORD.findall(folded):
            if not _CJK_RUN.search(word):
                found.append(word[:MAX_TERM])
                continue
            for piece in _CJK_RUN.split(word):
                if not piece:
                    continue
                if not _is_cjk(piece[0]):
                    found.append(piece[:MAX_TERM])
                elif len(piece) == 1:
                    found.append(piece)
                else:
                    found.extend(a + b for a, b in pairwise(piece))
    if stem is None:
        return found
    return [_stemmed(term, stem) for term in found]


STEMMING_LANGUAGES = ("english",)
"""The stemmers a tenant may choose (Snowball's; the `search` extra installs it)."""


def stemmer_for(language: str | None) -> Stemmer | None:
    """The Snowball stemmer for `language` (None: no stemming).

    Raises:
        ConfigurationError: `snowballstemmer` is not installed (``pip install
            'mindstore[search]'``), or the language is not one of `STEMMING_LANGUAGES`.
    """
    from mindstore.errors import ConfigurationError

    if language is None:
        return None
    if language not in STEMMING_LANGUAGES:
        raise ConfigurationError(
            f"stemming: {language!r} is not one of {', '.join(STEMMING_LANGUAGES)}"
        )
    try:
        import snowballstemmer  # type: ignore[import-untyped]
    except ImportError:
        raise ConfigurationError(
            "stemming needs snowballstemmer: pip install 'mindstore[search]'"
        ) from None
    algorithm = snowballstemmer.stemmer(language)
    cached = lru_cache(maxsize=65536)(algorithm.stemWord)
    return lambda word: str(cached(word))
