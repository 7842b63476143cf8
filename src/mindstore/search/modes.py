"""How a search finds its hits (pure): the `mode` and the `match`, checked in one place.

`mode` chooses the ranking: ``"lexical"`` (BM25 over the index's words), ``"semantic"``
(nearest vectors, given an embedder) or ``"hybrid"`` (the two fused). Left out (None), it
is ``"hybrid"`` when the store has an embedder, else ``"lexical"``. `match` chooses which
messages a lexical ranking admits: ``"any"`` (a message holding any of the query's
content words; stop words do not decide) or ``"all"`` (every word, as the query language
was before `match` existed). Both are refused before any I/O: a value of neither list is
a `ValidationError` naming it; a mode that needs an embedder, on a store without one, is
`NoEmbedder`, a `ConfigurationError` naming `mode`. docs/search.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeVar, get_args

from mindstore.errors import ConfigurationError, ValidationError

__all__ = [
    "MATCHES",
    "MODES",
    "Match",
    "Mode",
    "NoEmbedder",
    "Recall",
    "check_match",
    "check_mode",
    "choose_recall",
]

Mode = Literal["hybrid", "lexical", "semantic"]
Match = Literal["any", "all"]
MODES: tuple[Mode, ...] = get_args(Mode)
MATCHES: tuple[Match, ...] = get_args(Match)
NEEDS_EMBEDDER: frozenset[Mode] = frozenset({"hybrid", "semantic"})
_Choice = TypeVar("_Choice", bound=str)


class NoEmbedder(ConfigurationError):
    """A semantic or hybrid search asked of a store that has no embedder (the store's
    configuration, not the arguments, is what to change)."""


@dataclass(frozen=True)
class Recall:
    """A search's chosen mode and match (what its cursor is bound to, beside the query)."""

    mode: Mode
    match: Match


def _one_of(value: object, name: str, allowed: tuple[_Choice, ...]) -> _Choice:
    for choice in allowed:
        if value == choice and type(value) is str:
            return choice
    shown = repr(value) if isinstance(value, str) else type(value).__name__
    raise ValidationError(f"{name}: expected one of {', '.join(allowed)}, got {shown[:80]}")


def check_mode(value: object) -> Mode | None:
    """`value` as a mode (None: the store's default), else `ValidationError` naming `mode`."""
    return None if value is None else _one_of(value, "mode", MODES)


def check_match(value: object) -> Match:
    """`value` as a match, else `ValidationError` naming `match`."""
    return _one_of(value, "match", MATCHES)


def choose_recall(mode: object, match: object, *, has_embedder: bool) -> Recall:
    """The search's `Recall`, checked: `mode` (None: hybrid with an embedder, else
    lexical) and `match`.

    Raises:
        ValidationError: `mode` or `match` is not one of its values (the error names it).
        NoEmbedder: `mode` needs an embedder and the store has none (a
            `ConfigurationError`).
    """
    chosen_match = check_match(match)
    chosen = check_mode(mode)
    if chosen is None:
        return Recall("hybrid" if has_embedder else "lexical", chosen_match)
    if chosen in NEEDS_EMBEDDER and not has_embedder:
        raise NoEmbedder(
            f"mode: {chosen!r} needs an embedder, and this store has no embedder: "
            "connect(..., embedder=...)"
        )
    return Recall(chosen, chosen_match)
