"""The pure parts of search (docs/search.md): tokens, the query language, BM25, snippets,
blind tokens. No store."""

from __future__ import annotations

import math
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mindstore.errors import ConfigurationError, ValidationError
from mindstore.search.blind import Blinder, derive_search_key
from mindstore.search.bm25 import Corpus, idf, score
from mindstore.search.modes import MATCHES
from mindstore.search.query import MAX_QUERY_CHARS, parse_query
from mindstore.search.snippet import make_snippet
from mindstore.search.tokenize import MAX_TERM, stemmer_for, terms, tokens


def _reference_terms(text: str) -> list[str]:
    """An independent reading of the rule for non-CJK text: NFKC, casefold, drop combining
    marks, split on anything that is not a letter or digit."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    stripped = "".join(
        c for c in unicodedata.normalize("NFD", folded) if unicodedata.category(c) != "Mn"
    )
    words, word = [], ""
    for char in stripped:
        if unicodedata.category(char)[0] in "LN":
            word += char
        else:
            if word:
                words.append(word)
            word = ""
    if word:
        words.append(word)
    return [w[:MAX_TERM] for w in words]


LATIN = st.text(st.characters(codec="latin-1") | st.sampled_from("ﬁＡéÉ-_ \t.$"), max_size=60)


@given(LATIN)
@settings(max_examples=300, deadline=None)
def test_tokens_follow_the_unicode_rule(text: str) -> None:
    assert terms(text) == _reference_terms(text)


@given(st.text(max_size=80))
@settings(max_examples=300, deadline=None)
def test_every_token_spans_the_text_it_came_from(text: str) -> None:
    for token in tokens(text):
        assert 0 <= token.start < token.end <= len(text)
        assert token.term and len(token.term) <= MAX_TERM
        # the span folds back to text holding the term (a CJK bigram, or a word)
        assert (
            token.term[0] in "".join(terms(text[token.start : token.end])) or len(token.term) <= 2
        )


def test_case_accents_and_width_fold_cjk_makes_bigrams() -> None:
    assert terms("Café CAFE ｃａｆｅ café") == ["cafe"] * 4  # noqa: RUF001
    assert terms("Straße Größe") == ["strasse", "grosse"]
    assert terms("東京都に行く") == ["東京", "京都", "都に", "に行", "行く"]
    assert terms("A-1234 $where {x}") == ["a", "1234", "where", "x"]
    assert terms("x" * 100) == ["x" * MAX_TERM]


def test_english_stemming_is_optional() -> None:
    stem = stemmer_for("english")
    assert stem is not None
    assert terms("running runners ran", stem) == ["run", "runner", "ran"]
    assert terms("東京 runs", stem) == ["東京", "run"]
    with pytest.raises(ConfigurationError, match="stemming"):
        stemmer_for("klingon")


def test_the_query_language_parses_to_terms() -> None:
    parsed = parse_query('Lisbon "hotel booking" -draft role:user tool:Get_Weather', match="all")
    assert parsed.required == ("lisbon", "hotel", "booking", "tool:get_weather")
    assert parsed.scored == ("lisbon", "hotel", "booking") and parsed.any_of == ()
    assert parsed.phrases == (("hotel", "booking"),)
    assert parsed.excluded == ("draft",) and parsed.roles == frozenset({"user"})
    assert parse_query('"unclosed quote here').phrases == (("unclosed", "quote", "here"),)
    assert parse_query("-tool:x word").excluded == ("tool:x",)
    # match="any" (the default): the phrase and the tool are required, the words rank
    parsed = parse_query('Lisbon "hotel booking" -draft role:user tool:Get_Weather')
    assert parsed.required == ("hotel", "booking", "tool:get_weather")
    assert parsed.scored == ("lisbon", "hotel", "booking") and parsed.any_of == ()
    assert parsed.phrases == (("hotel", "booking"),) and parsed.excluded == ("draft",)


@pytest.mark.parametrize(
    ("query", "message"),
    [("", "nothing to find"), ("-only", "nothing to find"), ("role:user", "nothing to find"),
     ("a\x00", "control"), ("x" * (MAX_QUERY_CHARS + 1), "at most"), ("role:king x", "role"),
     (" ".join(f"w{n}" for n in range(40)), "at most"), ('-"two words" x', "negated"),
     ("tool:\udc80", "surrogate"), ("tool:get_\ud800weather", "surrogate"),
     ("lisbon \udfff", "surrogate"), ('"hotel \ud83d"', "surrogate"),
     ("role:\udc80 x", "surrogate"),
     ("x\x85", "control"), ("x\x9b[31m", "control"), ("x\x1b", "control")],
)  # fmt: skip
def test_bad_queries_are_typed_errors(query: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        parse_query(query)


HOSTILE = st.sampled_from(
    ["\x00", "\x1b", "\x7f", "\x85", "\u200b", "\u200d", "\u202e", "\u2066", "\u2069",
     "\ufeff", "\ufffe", "\U0010ffff", "$where", "{\"$ne\": 1}", ".*", "A-1234", "が", "々",
     "ﷺ", "\u0301", "\ud800", "\udc80", "\udfff", '"']
)  # fmt: skip
PIECE = st.tuples(
    st.sampled_from(["", "", "-", "tool:", "-tool:", "role:", '"']),
    st.lists(HOSTILE | st.characters(blacklist_categories=()), min_size=1, max_size=8).map("".join),
)
QUERIES = st.lists(PIECE.map("".join), min_size=1, max_size=12).map(" ".join) | st.builds(
    lambda piece, times: piece * times, HOSTILE, st.integers(100, 5000)
)


@given(QUERIES)
@settings(max_examples=150, deadline=None)
def test_any_text_is_a_query_or_a_typed_error(query: str) -> None:
    """Arbitrary text (surrogates, controls, bidi and format characters, operators, huge
    inputs) parses or is refused as a `ValidationError` naming the query; nothing else.
    What parses is terms a postings `_id` holds as it is, under either match."""
    for match in MATCHES:
        try:
            parsed = parse_query(query, match=match)
        except ValidationError as error:
            assert "query" in str(error)
            continue
        assert len(query) <= MAX_QUERY_CHARS
        # something decides: every required term, or (any) at least one scored word
        assert parsed.required if match == "all" else (parsed.required or parsed.any_of)
        _terms_are_plain(parsed.lookup)


def _terms_are_plain(lookup: tuple[str, ...]) -> None:
    import bson

    from mindstore.search.index import postings_id

    for term in lookup:
        # a word is letters, digits and marks; a tool name is literal text after `tool:`
        assert term.startswith("tool:") or (len(term) <= MAX_TERM and "$" not in term)
        bson.encode({"_id": postings_id("acme", term, 0)})  # UTF-8 and BSON can carry it


def test_bm25_is_lucenes_formula() -> None:
    corpus = Corpus(documents=3, length=8)
    assert idf(corpus, 1) == pytest.approx(math.log(1 + 2.5 / 1.5))
    # bm25s (Lucene) leaves out the constant (k1 + 1): the same ranking, scaled
    value = score(corpus, {"a": 2, "b": 1}, 3, ["a", "b"], {"a": 1, "b": 2})
    assert value / 2.2 == pytest.approx(0.7954436, rel=1e-6)
    assert score(corpus, {"a": 0}, 3, ["a"], {"a": 1}) == 0.0
    assert idf(Corpus(1, 1), 5) >= 0  # never negative, even when statistics lag


def test_snippets_mark_the_query_words_in_the_original_text() -> None:
    text = "intro " * 40 + "We booked the Café Central in Lisbon for May. " + "outro " * 40
    snippet = make_snippet(text, {"cafe", "lisbon"})
    assert snippet.text.startswith("…") and snippet.text.endswith("…")
    assert "**Café** Central in **Lisbon**" in snippet.marked()
    assert make_snippet("東京都", {"東京", "京都"}).marked() == "**東京都**"
    assert make_snippet("nothing", {"x"}).highlights == ()


def test_blind_tokens_are_keyed_and_stable() -> None:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    key = AESGCM(b"k" * 32)
    one, two = Blinder(derive_search_key(key, "acme")), Blinder(derive_search_key(key, "beta"))
    assert one("lisbon") == Blinder(derive_search_key(key, "acme"))("lisbon")
    assert one("lisbon") != two("lisbon") and one("lisbon") != one("porto")
    assert "lisbon" not in one("lisbon") and len(one("lisbon")) == 22


@given(st.text(max_size=120))
@settings(max_examples=300, deadline=None)
def test_the_fast_token_path_reads_like_the_character_walk(text: str) -> None:
    from mindstore.search.tokenize import _unicode_tokens

    assert tokens(text) == list(_unicode_tokens(text))


@given(st.integers(0, 10**7), st.lists(st.integers(0, 10**5), max_size=8, unique=True),
       st.integers(0, 10**6), st.sampled_from(["user", "assistant", "tool", "taskexit",
                                               "custom_role", "a,b;c", "ü"]),
       st.integers(-(10**15), 10**16), st.none() | st.text(max_size=8),
       st.integers(1, 2**40))  # fmt: skip
@settings(max_examples=200, deadline=None)
def test_a_posting_and_its_table_row_pack_and_unpack(
    index: int, positions: list[int], length: int, role: str, micros: int,
    owner: str | None, ordinal: int,
) -> None:  # fmt: skip
    """A posting keeps index, count and positions under its task's ordinal; the message's
    length, role and time are its chunk's table's, and the two join back to the message."""
    from bson import BSON

    from mindstore.search.entries import Entry, Row, pack_chunks, tables_of
    from mindstore.search.index import Packed, pack_group, unpack
    from mindstore.search.postings import Occurrence

    at = tuple(sorted(positions))
    items = [Packed(n, at) for n in (index, index + 1)]
    (group,) = pack_group(ordinal, "term", items, None)
    assert unpack(group) == [Occurrence(ordinal, n, len(at), at) for n in (index, index + 1)]
    entries = [Entry(f"k/{n}", n, f"m{n}", length, "x", {}, role, micros + n) for n in (index,
               index + 1)]  # fmt: skip
    chunks = [
        BSON.encode(c).decode()
        for c in pack_chunks(entries, "t", "task", owner, lambda x, _t, _c: x, ordinal)
    ]  # fmt: skip (stored and read back)
    (table,) = tables_of(chunks).values()
    assert (table.task, table.owner) == ("task", owner)
    (chunk,) = {row.chunk for row in table.rows.values()}
    assert table.rows == {n: Row(length, role, micros + n, chunk) for n in (index, index + 1)}
