"""English stop words (pure): the words that do not decide a `match="any"` ranking.

Function words, pronouns, auxiliaries, question words and the pieces a contraction or a
possessive splits into (``sister's`` -> ``sister``, ``s``; ``didn't`` -> ``didn``,
``t``). A question as a user types it ("What did Caroline say about her sister's
wedding?") is then ranked by its content words (``caroline``, ``say``, ``sister``,
``wedding``). They are compared with a query's terms as folded, before stemming; a query
made only of them searches them (docs/search.md, "Matching any word or all").
"""

from __future__ import annotations

__all__ = ["STOP_WORDS", "is_stop_word"]

STOP_WORDS: frozenset[str] = frozenset(
    """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just me more most my myself no nor not of off on once only or
    other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your
    yours yourself yourselves
    s t d ll m re ve don doesn didn isn wasn aren weren wouldn shouldn couldn hasn haven
    hadn
    """.split()  # noqa: SIM905 (a list of words reads as one)
)
"""The list (lower case, as terms are folded): a small one, NLTK's English list less a
few rare entries, so that words that carry a topic stay searchable."""


def is_stop_word(term: str) -> bool:
    """Whether `term` (a folded, unstemmed term) is a stop word."""
    return term in STOP_WORDS
