"""The query language (pure): what people already type into a search box.

``lisbon hotel`` under ``match="any"`` (the default) a message holding either word, ranked
by both (stop words do not decide: `stopwords`); under ``match="all"`` every word must
match; ``"lisbon hotel"`` the words next to each other, in that order (required under
either match); ``-draft`` no message holding the word; ``role:user`` only that role;
``tool:get_weather`` only messages that call the tool or carry its result. Everything
else is literal text: ``$where``, ``.*`` or ``{"$ne": 1}`` are words (or nothing), never
an operator, because a query reaches the database only as normalised terms (or their
keyed tokens), never as a filter it wrote. An unbalanced quote runs to the end of the
query. Refused, as `ValidationError` naming ``query``: a query that is not a string,
longer than `MAX_QUERY_CHARS`, holding a NUL or other control character (C0 or C1; tab
and newlines are spaces) or a lone surrogate anywhere (not text: UTF-8 cannot carry it,
so no term could be stored or looked up), with more than `MAX_TERMS` terms, or with
nothing to find (no word and no ``tool:``). Any other text parses: format characters
(bidi controls, zero-width joiners) and unassigned code points separate words.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from mindstore.errors import ValidationError
from mindstore.model.messages import MessageRole

from .modes import Match
from .stopwords import is_stop_word
from .tokenize import Stemmer, terms

__all__ = ["MAX_QUERY_CHARS", "MAX_TERMS", "ParsedQuery", "parse_query", "tool_term"]

MAX_QUERY_CHARS = 1024
MAX_TERMS = 32
ROLES = frozenset(role.value for role in MessageRole)
TOOL_PREFIX = "tool:"
"""Tool names are indexed as terms with this prefix: a word never holds a colon, so
`tool:` filters share the index (and its keyed tokens) with words."""


def tool_term(name: str) -> str:
    """The index term of a tool name (case folded, surrounding space stripped)."""
    return TOOL_PREFIX + name.strip().casefold()


@dataclass(frozen=True)
class ParsedQuery:
    """A query, as terms: `required` all must occur (under ``match="all"`` every word;
    under ``"any"`` the phrases' words and the tools), `any_of` at least one must occur
    when not empty (under ``"any"`` with no phrase nor tool: the scored words), `scored`
    the words BM25 ranks by (under ``"any"`` the words that are not stop words, when
    there are any), `phrases` term sequences that must occur in order, `excluded` terms
    none may hold, `roles` the roles allowed (empty: any)."""

    required: tuple[str, ...]
    scored: tuple[str, ...]
    phrases: tuple[tuple[str, ...], ...]
    excluded: tuple[str, ...]
    roles: frozenset[str]
    tools: tuple[str, ...]
    any_of: tuple[str, ...] = ()

    @property
    def lookup(self) -> tuple[str, ...]:
        """Every term the index is asked about (required first), each once."""
        return tuple(dict.fromkeys((*self.required, *self.scored, *self.excluded)))


def _check_text(query: object) -> str:
    if not isinstance(query, str):
        raise ValidationError(f"query must be a string, not {type(query).__name__}")
    if len(query) > MAX_QUERY_CHARS:
        raise ValidationError(f"query: at most {MAX_QUERY_CHARS} characters, got {len(query)}")
    for char in query:
        if char in "\t\n\r":
            continue
        category = unicodedata.category(char)
        if category == "Cc":
            raise ValidationError(f"query holds a control character (U+{ord(char):04X})")
        if category == "Cs":
            raise ValidationError(f"query holds a lone surrogate (U+{ord(char):04X}), not text")
    return query


def _pieces(query: str) -> list[tuple[bool, bool, str]]:
    """(negated, quoted, text) pieces: whitespace splits outside quotes; a quote opens a
    phrase that runs to the next quote or the end."""
    out: list[tuple[bool, bool, str]] = []
    at, size = 0, len(query)
    while at < size:
        if query[at].isspace():
            at += 1
            continue
        negated = query[at] == "-" and at + 1 < size and not query[at + 1].isspace()
        if negated:
            at += 1
        if query[at] == '"':
            end = query.find('"', at + 1)
            end = size if end < 0 else end
            out.append((negated, True, query[at + 1 : end]))
            at = end + 1
            continue
        end = at
        while end < size and not query[end].isspace():
            end += 1
        out.append((negated, False, query[at:end]))
        at = end
    return out


def parse_query(query: object, stem: Stemmer | None = None, match: Match = "any") -> ParsedQuery:
    """`query` as terms (see the module doc), with the tenant's stemmer, under `match`."""
    text = _check_text(query)
    words: list[str] = []
    content: list[str] = []
    phrases: list[tuple[str, ...]] = []
    excluded: list[str] = []
    roles: set[str] = set()
    tools: list[str] = []
    conjunction: list[str] = []  # every word and tool, in query order: "all"'s required
    for negated, quoted, piece in _pieces(text):
        lowered = piece.casefold()
        if not quoted and lowered.startswith("role:") and not negated:
            role = lowered[5:]
            if role not in ROLES:
                raise ValidationError(
                    f"query: role:{role} is not a role ({', '.join(sorted(ROLES))})"
                )
            roles.add(role)
            continue
        if not quoted and lowered.startswith(TOOL_PREFIX) and len(lowered) > len(TOOL_PREFIX):
            term = tool_term(piece[len(TOOL_PREFIX) :])
            (excluded if negated else tools).append(term)
            if not negated:
                conjunction.append(term)
            continue
        folded = terms(piece)
        found = terms(piece, stem) if stem is not None else folded
        if not found:
            continue
        if negated:
            if len(found) == 1:
                excluded.append(found[0])
            # a negated phrase of several words excludes nothing a single term decides;
            # it is refused rather than silently read otherwise
            else:
                raise ValidationError("query: a negated phrase is not supported; negate words")
            continue
        words.extend(found)
        conjunction.extend(found)
        content.extend(t for t, plain in zip(found, folded, strict=True) if not is_stop_word(plain))
        # a quoted phrase is a phrase under either match; a word with punctuation inside
        # (`A-1234`) is a phrase of its parts under "all", its parts under "any"
        if len(found) > 1 and (quoted or match == "all"):
            phrases.append(tuple(found))
    if match == "all":
        required = list(dict.fromkeys(conjunction))
        scored = words
        any_of: list[str] = []
    else:
        required = list(dict.fromkeys((*(t for p in phrases for t in p), *tools)))
        scored = content or words
        any_of = [] if required else list(dict.fromkeys(scored))
    asked = dict.fromkeys((*required, *scored))
    if len(asked) + len(set(excluded)) > MAX_TERMS:
        raise ValidationError(f"query: at most {MAX_TERMS} terms")
    if not required and not any_of:
        raise ValidationError("query: nothing to find (give a word, a phrase or tool:<name>)")
    return ParsedQuery(
        required=tuple(required),
        scored=tuple(scored),
        phrases=tuple(phrases),
        excluded=tuple(dict.fromkeys(t for t in excluded if t not in asked)),
        roles=frozenset(roles),
        tools=tuple(dict.fromkeys(tools)),
        any_of=tuple(any_of),
    )
