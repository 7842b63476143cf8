"""Text -> search terms (pure): the one normalisation the index and the queries share.

A term is a run of letters, digits and combining marks (Unicode categories L*, N* and
M*) after NFKC, case folding and accent folding, so "Café", "CAFE" and its full-width
form are one term. Scripts written without spaces (Han, Hiragana, Katakana) have no word
boundaries to find without a dictionary: each run of them becomes its overlapping
character bigrams ("東京都" -> "東京", "京都"), the scheme Lucene's CJK analyzer uses, so
a query finds any text that holds its bigrams. The iteration marks (々, 〻), 〆 and the
ideographic zero belong to the run they stand in ("時々雨" -> "時々", "々雨"). English
stemming (Snowball) is optional, per tenant.

Accent folding drops only the marks that are optional accents or vowel points in their
script: the combining diacritics Latin, Greek and Cyrillic letters decompose into
(U+0300-036F and their extension blocks), Hebrew points and cantillation, Arabic harakat
(fathatan to sukun) and the superscript alef. Every other mark is part of its letter
and stays: kana voicing (が is not か, ド is not ト), Devanagari and the other Indic vowel
signs and viramas (के is not क), Thai vowels. After folding the text is composed again
(NFC), so a kana syllable or a Hangul syllable is one character, never its jamo.

Every term keeps the span of the original text it came from, for snippets: the text is
read in clusters (a character and the marks that combine with it), each folded alone,
which gives the same terms as folding the whole text at once.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cache, lru_cache
from itertools import chain, pairwise

__all__ = [
    "MAX_TERM",
    "STEMMING_LANGUAGES",
    "TOKENIZER_VERSION",
    "Stemmer",
    "Token",
    "normalise",
    "stemmer_for",
    "terms",
    "tokens",
]

TOKENIZER_VERSION = 2
"""Moves on whenever the terms of some text change (2: kana voicing, Indic vowel signs and
Hangul kept, iteration marks in CJK runs). The index records the version it was built
with; a search under another version rebuilds it rather than mix old terms with new."""

MAX_TERM = 40
"""Longer runs (base64, hashes) are cut to this many characters: still findable by their
start, and the index entry stays small."""

Stemmer = Callable[[str], str]
"""A term -> its stem (applied to alphabetic, non-CJK terms only)."""

_ASCII_WORD = re.compile(r"[a-z0-9]+")
_CJK_RANGES = (
    (0x3005, 0x3007),  # 々 iteration mark, 〆 closing mark, ideographic zero
    (0x303B, 0x303C),  # 〻 vertical iteration mark, 〼 masu mark
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x31F0, 0x31FF),  # Katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xF900, 0xFAFF),  # compatibility ideographs
    (0x20000, 0x2FA1F),  # extensions B-F, compatibility supplement
)
_FOLDED_MARK_RANGES = (
    (0x0300, 0x036F),  # combining diacritical marks: Latin, Greek, Cyrillic accents
    (0x1AB0, 0x1AFF),  # combining diacritical marks extended
    (0x1DC0, 0x1DFF),  # combining diacritical marks supplement
    (0x20D0, 0x20FF),  # combining diacritical marks for symbols
    (0xFE20, 0xFE2F),  # combining half marks
    (0x0591, 0x05C7),  # Hebrew cantillation and points (niqqud)
    (0x064B, 0x0652),  # Arabic harakat: tanwin, fatha, damma, kasra, shadda, sukun
    (0x0670, 0x0670),  # Arabic superscript alef
)
_HANGUL_JAMO_TAILS = ((0x1160, 0x11FF), (0xD7B0, 0xD7FF))
"""Medial and final conjoining jamo: they compose with the syllable before them."""


def _class(points: Iterable[int]) -> str:
    """A regex character class body for `points` (ascending), as ranges."""
    out: list[str] = []
    run: list[int] = []
    for point in points:
        if run and point == run[-1] + 1:
            run.append(point)
            continue
        if run:
            out.append(f"\\U{run[0]:08x}-\\U{run[-1]:08x}")
        run = [point]
    if run:
        out.append(f"\\U{run[0]:08x}-\\U{run[-1]:08x}")
    return "".join(out)


_FOLDED_MARK = re.compile(
    "["
    + _class(
        point
        for low, high in _FOLDED_MARK_RANGES
        for point in range(low, high + 1)
        if unicodedata.category(chr(point)) == "Mn"
    )
    + "]+"
)
_CJK_RUN = re.compile(
    "([" + "".join(f"\\U{low:08x}-\\U{high:08x}" for low, high in _CJK_RANGES) + "]+)"
)
MARK_PLANES = (range(0x20000), range(0xE0000, 0xE1000))
"""Where Unicode's combining marks are (planes 0-1 and the variation selectors of plane
14); tests check that no mark lies elsewhere."""


@cache
def _word_run() -> re.Pattern[str]:
    """A run of word characters: `\\w` (letters and digits, and `_`, which `terms` turns
    into a space first) or a combining mark. Built at first use (some 50 ms)."""
    marks = _class(
        point for point in chain(*MARK_PLANES) if unicodedata.category(chr(point))[0] == "M"
    )
    return re.compile(f"[\\w{marks}]+")


def _is_cjk(char: str) -> bool:
    point = ord(char)
    return any(low <= point <= high for low, high in _CJK_RANGES)


def _is_word_char(char: str) -> bool:
    return char.isalnum() or unicodedata.category(char)[0] == "M"


def _fold_text(text: str) -> str:
    """NFKC, case folding and accent folding (see the module doc), composed again."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    decomposed = unicodedata.normalize("NFD", folded)
    return unicodedata.normalize("NFC", _FOLDED_MARK.sub("", decomposed))


@lru_cache(maxsize=65536)
def _fold(cluster: str) -> str:
    """One cluster of the original text (a character and the marks that combine with it),
    normalised: each resulting character is kept when it is a word character (a letter,
    a digit or a mark), else it becomes a space (a separator). A compatibility character
    may become several ("ﬁ" -> "fi")."""
    return "".join(c if _is_word_char(c) else " " for c in _fold_text(cluster))


@lru_cache(maxsize=65536)
def _combines(char: str) -> bool:
    """Whether `char` joins the cluster before it: it normalises to a combining mark, or
    a Hangul medial or final jamo (which compose with the syllable before them)."""
    first = unicodedata.normalize("NFKC", char)[:1]
    if not first:
        return False
    point = ord(first)
    if any(low <= point <= high for low, high in _HANGUL_JAMO_TAILS):
        return True
    return unicodedata.category(first)[0] == "M"


def _clusters(text: str) -> Iterator[tuple[int, int]]:
    """The `[start, end)` of each cluster of `text` (see `_fold`). Whitespace never
    composes with what follows, so a mark after it starts a cluster of its own."""
    start = 0
    for index in range(1, len(text)):
        if not _combines(text[index]) or text[index - 1].isspace():
            yield start, index
            start = index
    if text:
        yield start, len(text)


def normalise(text: str) -> str:
    """The folded text (word characters, everything else a space)."""
    return "".join(_fold(text[start:end]) for start, end in _clusters(text))


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
    the ASCII ones by a regex, the others cluster by cluster."""
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
    cjk: list[tuple[str, int, int]] = []  # (char, its cluster's start and end)

    def flush_word() -> Iterator[Token]:
        if word:
            yield Token("".join(word)[:MAX_TERM], span[0], span[1])
            word.clear()

    def flush_cjk() -> Iterator[Token]:
        if len(cjk) == 1:
            char, start, end = cjk[0]
            yield Token(char, start, end)
        for (first, start, _), (second, _, end) in pairwise(cjk):
            yield Token(first + second, start, end)
        cjk.clear()

    for start, end in _clusters(text):
        for folded in _fold(text[start:end]):
            if folded == " ":
                yield from flush_word()
                yield from flush_cjk()
            elif _is_cjk(folded):
                yield from flush_word()
                cjk.append((folded, start, end))
            else:
                yield from flush_cjk()
                if not word:
                    span[0] = start
                word.append(folded)
                span[1] = end
    yield from flush_word()
    yield from flush_cjk()


def terms(text: str, stem: Stemmer | None = None) -> list[str]:
    """The terms of `text`, in order (with repeats): what the index stores and a query
    asks for. The whole text is normalised at once (no spans: `tokens` keeps them)."""
    if text.isascii():
        found = [word[:MAX_TERM] for word in _ASCII_WORD.findall(text.lower())]
    else:
        folded = _fold_text(text).replace("_", " ")
        found = []
        for word in _word_run().findall(folded):
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
