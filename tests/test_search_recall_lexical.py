"""Lexical recall (docs/search.md, "Matching any word or all"): `match="any"`, the default,
finds a message holding any content word of the query, ranked by BM25; `mode` and `match`
are checked before any I/O and bind the cursor; the CLI's `--mode`/`--match` and the
console's selectors.

Judged by an independent BM25 (bm25s, Lucene's formula, k1 = 1.2, b = 0.75) over the same
small corpus, tokenised here by a regular expression of its own (lower-cased ASCII runs of
letters and digits, as the corpus is plain English): the set of hits of `match="any"` is
the set of messages sharing a query word that is not a stop word (the documented list),
and the hits come in the reference's order with its scores."""

from __future__ import annotations

import asyncio
import html
import itertools
import random
import re
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import bm25s
import httpx
import pytest
import snowballstemmer  # type: ignore[import-untyped]
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import mindstore
from conftest import close_store, open_store
from console_support import ADMIN_TOKEN, OPERATORS
from mindstore.backends.snapshot import save_snapshot
from mindstore.cli import app as cli_app
from mindstore.collection_names import SEARCH_ENTRIES, SEARCH_POSTINGS, SEARCH_TASKS, TASKS
from mindstore.console import app as console_app
from mindstore.errors import ConfigurationError, ValidationError
from mindstore.search.modes import MATCHES, MODES, NoEmbedder
from mindstore.search.stopwords import STOP_WORDS

WORD = re.compile(r"[a-z0-9]+")
TOPICS = ["wedding", "sister", "june", "caroline", "pottery", "class", "melanie", "painting",
          "sunrise", "lake", "camping", "vacation", "paris", "museum", "guitar", "concert",
          "adoption", "agency", "support", "group", "charity", "race", "marathon", "dog",
          "puppy", "garden", "roses", "violin", "recital"]  # fmt: skip
FILLERS = ["the", "a", "of", "and", "to", "in", "is", "was", "it", "that", "she", "he", "her",
           "his", "my", "we", "what", "did", "about", "said", "told", "really", "very", "just",
           "so"]  # fmt: skip


def _tokens(text: str) -> list[str]:
    return WORD.findall(text.lower())


def _corpus(seed: int, size: int) -> list[str]:
    """Short English-like messages: topic words among function words, distinct lengths."""
    rng = random.Random(seed)
    out = []
    for n in range(size):
        words = rng.sample(TOPICS, rng.randint(1, 4)) + rng.choices(FILLERS, k=rng.randint(2, 9))
        rng.shuffle(words)
        text = " ".join(words)
        out.append(text[0].upper() + text[1:] + ("?" if n % 3 == 0 else "."))
    return out


async def _load(view: mindstore.TenantStore, texts: Sequence[str], per_task: int = 7) -> list[str]:
    """The texts as human messages (id `m<n>`), `per_task` to a task; returns the ids."""
    ids = []
    task = None
    for n, text in enumerate(texts):
        if n % per_task == 0:
            task = await view.tasks.create(owner="alice")
        assert task is not None
        await view.tasks.add_human_message(task.id, text, message_id=f"m{n}")
        ids.append(f"m{n}")
    return ids


async def _walk(view: Any, query: str, limit: int = 100, **options: Any) -> list[Any]:
    """Every hit of a query, page after page (each page asked with the last's cursor)."""
    page = await view.search(query, limit=limit, **options)
    hits = list(page.hits)
    while page.next_cursor is not None:
        page = await view.search(query, limit=limit, cursor=page.next_cursor, **options)
        hits += page.hits
    return hits


class Reference:
    """bm25s over the corpus, on this module's tokenizer (optionally Snowball-stemmed)."""

    def __init__(self, texts: Sequence[str], stem: bool = False) -> None:
        self.stemmer = snowballstemmer.stemmer("english") if stem else None
        self.documents = [self._terms(_tokens(t)) for t in texts]
        self.engine = bm25s.BM25(method="lucene", k1=1.2, b=0.75)
        self.engine.index(self.documents, show_progress=False)

    def _terms(self, words: list[str]) -> list[str]:
        return [self.stemmer.stemWord(w) for w in words] if self.stemmer else words

    def query_terms(self, query: str) -> list[str]:
        words = _tokens(query)
        content = [w for w in words if w not in STOP_WORDS] or words
        return list(dict.fromkeys(self._terms(content)))

    def matches(self, query: str) -> set[int]:
        wanted = set(self.query_terms(query))
        return {n for n, doc in enumerate(self.documents) if wanted & set(doc)}

    def scores(self, query: str) -> list[float]:
        return [float(s) for s in self.engine.get_scores(self.query_terms(query))]


def _queries(seed: int, count: int) -> list[str]:
    """Queries as typed: topic words with function words, case, punctuation, possessives."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        words = rng.sample(TOPICS, rng.randint(1, 3)) + rng.sample(FILLERS, rng.randint(0, 3))
        rng.shuffle(words)
        words = [w.capitalize() if rng.random() < 0.3 else w for w in words]
        words = [w + "'s" if rng.random() < 0.15 else w for w in words]
        out.append(" ".join(words) + rng.choice(["", "?", ".", "!"]))
    return out


@pytest.mark.parametrize("stemming", [None, "english"])
async def test_any_matches_and_ranks_as_an_independent_bm25(acme: Any, stemming: Any) -> None:
    texts = _corpus(seed=47, size=60)
    await _load(acme, texts)
    if stemming:
        await acme.search_index.rebuild(stemming=stemming)
    reference = Reference(texts, stem=stemming is not None)
    checked = 0
    for query in _queries(seed=11, count=25):
        hits = await _walk(acme, query, limit=100)
        found = [int(h.message_id[1:]) for h in hits]
        assert len(found) == len(set(found)), query  # each message once
        assert set(found) == reference.matches(query), query
        scores = reference.scores(query)
        for hit, n in zip(hits, found, strict=True):
            # bm25s leaves out Lucene's constant factor (k1 + 1): the same order
            assert hit.score == pytest.approx(2.2 * scores[n], rel=1e-4, abs=1e-4), (query, n)
        in_order = [scores[n] for n in found]
        assert all(a >= b - 1e-5 for a, b in itertools.pairwise(in_order)), query
        checked += len(found)
    assert checked > 200  # the queries do find things


async def test_stop_words_do_not_decide_unless_the_query_has_nothing_else(acme: Any) -> None:
    await _load(acme, ["What is the plan?", "The plan is ready", "It was what it was",
                       "Lisbon hotel"])  # fmt: skip
    # "what", "is", "the" are stop words: only "plan" decides
    assert sorted(h.message_id for h in await _walk(acme, "What is the plan?")) == ["m0", "m1"]
    # nothing but stop words: they are the query
    assert sorted(h.message_id for h in await _walk(acme, "what was it")) == ["m0", "m2"]
    # a stop word in the query never adds a message of its own
    assert [h.message_id for h in await _walk(acme, "the lisbon")] == ["m3"]
    # under "all", as before: every word is required, stop words included
    assert [h.message_id for h in await _walk(acme, "what plan", match="all")] == ["m0"]


async def test_a_natural_question_finds_its_answer(acme: Any) -> None:
    """The question as typed (case, punctuation, possessive, question words): today's
    conjunction (`match="all"`) finds nothing; `any` puts the answer first."""
    conversation = [
        "Hey Mel! Good to see you. How have you been?",
        "I went to a support group yesterday and it was really powerful.",
        "My sister's wedding is in June, I am so excited for her!",
        "Melanie signed up for a pottery class last week.",
        "We went camping at the lake and watched the sunrise.",
        "I am planning to run a charity race next month.",
        "Caroline, tell me more about the adoption agency.",
    ]
    await _load(acme, conversation, per_task=4)
    questions = {
        "What did Caroline say about her sister's wedding?": "m2",
        "When is Caroline's sister's WEDDING?": "m2",
        "What did Melanie sign up for? A pottery class?": "m3",
        "Where did they go camping?": "m4",
        "Who is running the charity race?": "m5",
        "what's the support group like": "m1",
    }
    for question, answer in questions.items():
        assert [h.message_id for h in (await acme.search(question)).hits][:1] == [answer]
    assert (await acme.search(next(iter(questions)), match="all")).hits == []
    # English stemming, when the tenant chose it, meets "painting" from "paint" too
    await _load(acme, ["She loves painting sunsets"], per_task=1)
    assert "m0" not in [h.message_id for h in (await acme.search("Did she paint?")).hits]
    await acme.search_index.rebuild(stemming="english")
    assert [h.message_id for h in (await acme.search("Did she paint?")).hits] == ["m0"]


async def test_phrases_and_negation_keep_working_under_any(acme: Any) -> None:
    await _load(acme, ["pottery class on monday", "a class about pottery", "pottery wheel",
                       "guitar class", "the wedding in june"])  # fmt: skip
    ids = lambda hits: sorted(h.message_id for h in hits)  # noqa: E731
    assert ids(await _walk(acme, '"pottery class"')) == ["m0"]
    # a phrase is required; the other words rank among the messages that hold it
    assert ids(await _walk(acme, 'wedding "pottery class"')) == ["m0"]
    assert ids(await _walk(acme, "pottery class -wheel")) == ["m0", "m1", "m3"]
    assert ids(await _walk(acme, "pottery -class")) == ["m2"]
    assert ids(await _walk(acme, '"the wedding" -june')) == []
    # a word with punctuation inside: its parts under "any", a phrase of them under "all"
    assert ids(await _walk(acme, "class-pottery")) == ["m0", "m1", "m2", "m3"]
    assert ids(await _walk(acme, "class-pottery", match="all")) == []
    assert ids(await _walk(acme, "pottery-class", match="all")) == ["m0"]


async def test_an_owner_scoped_view_never_sees_another_owners_messages(store: Any) -> None:
    acme = store.scoped("acme")
    for owner in ("alice", "bob"):
        task = await acme.tasks.create(owner=owner)
        for n, text in enumerate(["wedding plans", "sister news", "wedding of my sister"]):
            await acme.tasks.add_human_message(task.id, text, message_id=f"{owner}{n}")
    other = store.scoped("globex")
    task = await other.tasks.create(owner="alice")
    await other.tasks.add_human_message(task.id, "sister wedding", message_id="globex")
    query = "What about my sister's wedding?"
    alice = store.scoped("acme", owner="alice")
    for limit in (1, 2, 100):
        assert sorted(h.message_id for h in await _walk(alice, query, limit)) == [
            "alice0", "alice1", "alice2"]  # fmt: skip
        assert sorted(h.message_id for h in await _walk(acme, query, limit, owner="bob")) == [
            "bob0", "bob1", "bob2"]  # fmt: skip
    assert len(await _walk(acme, query)) == 6
    assert [h.message_id for h in await _walk(other, query)] == ["globex"]
    with pytest.raises(ValidationError, match="owner"):
        await alice.search(query, owner="bob")


async def test_a_walk_at_tiny_pages_returns_each_message_once_beside_appends(acme: Any) -> None:
    texts = _corpus(seed=3, size=30)
    await _load(acme, texts)
    query = "What about the wedding, the concert or the garden?"
    expected = {f"m{n}" for n in Reference(texts).matches(query)}
    assert len(expected) > 8
    task = await acme.tasks.create(owner="alice")
    for limit in (1, 2, 3):
        page = await acme.search(query, limit=limit)
        total = page.total
        seen = [h.message_id for h in page.hits]
        step = 0
        while page.next_cursor is not None:
            step += 1  # a matching and a non-matching message appended between pages
            await acme.tasks.add_human_message(task.id, f"concert {limit} {step}")
            await acme.tasks.add_human_message(task.id, f"nothing here {limit} {step}")
            page = await acme.search(query, limit=limit, cursor=page.next_cursor)
            seen += [h.message_id for h in page.hits]
        assert len(seen) == len(set(seen))  # no message twice
        assert expected <= set(seen) and total >= len(expected)


async def test_a_cursor_is_bound_to_its_mode_and_match(acme: Any) -> None:
    await _load(acme, [f"wedding note {n}" for n in range(5)])
    page = await acme.search("wedding note", limit=2)
    assert page.next_cursor is not None
    await acme.search("wedding note", limit=2, cursor=page.next_cursor, mode="lexical")
    with pytest.raises(ValidationError, match="cursor: from another query, mode, match"):
        await acme.search("wedding note", limit=2, cursor=page.next_cursor, match="all")
    every = await acme.search("wedding note", limit=2, match="all")
    with pytest.raises(ValidationError, match="cursor"):
        await acme.search("wedding note", limit=2, cursor=every.next_cursor)


async def _stored(store: mindstore.Store) -> list[list[dict[str, Any]]]:
    return [await store.database[name].find({}).to_list(None)
            for name in (TASKS, SEARCH_POSTINGS, SEARCH_ENTRIES, SEARCH_TASKS)]  # fmt: skip


@pytest.mark.parametrize(
    ("options", "error", "named"),
    [({"mode": "fast"}, ValidationError, "mode: expected one of hybrid, lexical, semantic"),
     ({"mode": "LEXICAL"}, ValidationError, "mode"), ({"mode": ""}, ValidationError, "mode"),
     ({"mode": 1}, ValidationError, "mode"), ({"mode": {"$ne": 1}}, ValidationError, "mode"),
     ({"match": None}, ValidationError, "match"), ({"match": "some"}, ValidationError, "match"),
     ({"match": ["any"]}, ValidationError, "match"),
     ({"mode": "semantic"}, NoEmbedder, "mode: 'semantic' needs an embedder"),
     ({"mode": "hybrid"}, NoEmbedder, "this store has no embedder: connect"),
     ({"mode": "semantic", "match": "all"}, ConfigurationError, "mode")],
)  # fmt: skip
async def test_a_bad_mode_or_match_is_refused_before_any_io(
    acme: Any, options: dict[str, Any], error: type[Exception], named: str
) -> None:
    assert issubclass(NoEmbedder, ConfigurationError)
    await _load(acme, ["wedding plans"])
    assert (await acme.search("wedding")).hits
    before = await _stored(acme.store)
    with acme.store.backend.recorder.capture() as log, pytest.raises(error, match=named):
        await acme.search("wedding", **options)
    assert [c.name for c in log] == []  # zero commands
    assert await _stored(acme.store) == before


async def test_the_default_mode_is_lexical_without_an_embedder(acme: Any) -> None:
    await _load(acme, ["wedding plans", "sister wedding", "plans"])
    default = await acme.search("sister's wedding plans")
    lexical = await acme.search("sister's wedding plans", mode="lexical", match="any")
    assert default.hits == lexical.hits and len(default.hits) == 3
    assert default.next_cursor == lexical.next_cursor  # one fingerprint: same mode, match


TEXT = st.lists(
    st.characters(blacklist_categories=())
    | st.sampled_from(["$x", "$where", ".", "..", '"', "-", " - ", "'s", "What", "?", "tool:",
                       "role:user", "\u202e", "々", "が", "{\"$ne\": 1}", " the ", "wedding"]),
    max_size=16,
).map("".join)  # fmt: skip


@settings(max_examples=20, deadline=None)
@given(
    st.lists(TEXT, min_size=1, max_size=3),
    st.sampled_from([*MODES, None, "bogus"]),
    st.sampled_from([*MATCHES, "none"]),
)
def test_any_text_in_any_mode_is_a_page_or_a_typed_error(
    queries: list[str], mode: str | None, match: str
) -> None:
    """Hostile text under every mode and match: a page, or an error naming the query, the
    mode or the match; the stored data (tasks and index) unchanged by the searches."""

    async def run() -> None:
        store = await open_store()
        try:
            acme = store.scoped("acme")
            task = await acme.tasks.create()
            for text in ("sister's wedding", "what $x .. means", "が 々 the"):
                await acme.tasks.add_human_message(task.id, text)
            await acme.search("wedding")  # the index caught up: searches write nothing now
            before = await _stored(store)
            for query in queries:
                try:
                    page = await acme.search(query, limit=1, mode=mode, match=match)
                except ValidationError as error:
                    assert str(error).split(":")[0].split(" ")[0] in ("query", "mode", "match")
                    continue
                except ConfigurationError as error:
                    assert mode in ("semantic", "hybrid") and str(error).startswith("mode:")
                    continue
                assert mode in (None, "lexical") and match in MATCHES
                if page.next_cursor is not None:
                    await acme.search(query, limit=1, mode=mode, match=match,
                                      cursor=page.next_cursor)  # fmt: skip
            assert await _stored(store) == before
        finally:
            await close_store(store)

    asyncio.run(run())


# ------------------------------------------------------------------ the CLI
async def _seed(path: Path) -> None:
    store = await mindstore.connect("embedded", database="cli_recall")
    try:
        await _load(store.scoped("acme"), ["my sister's wedding", "wedding cake", "sister act"])
        await save_snapshot(store.database, path)
    finally:
        await store.close()


def test_the_cli_takes_mode_and_match(tmp_path: Path) -> None:
    import json

    data = tmp_path / "store.gz"
    asyncio.run(_seed(data))
    runner = CliRunner()

    def ids(*options: str) -> list[str]:
        out = runner.invoke(cli_app, ["--data", str(data), "search", "What about her sister?",
                                      "--tenant", "acme", "-f", "json", *options])  # fmt: skip
        assert out.exit_code == 0, out.output
        return sorted(h["message_id"] for h in json.loads(out.output)["hits"])

    assert ids() == ids("--match", "any", "--mode", "lexical") == ["m0", "m2"]
    assert ids("--match", "all") == []
    for bad in (["--mode", "fast"], ["--match", "some"], ["--mode", "$ne"]):
        out = runner.invoke(cli_app, ["--data", str(data), "search", "sister",
                                      "--tenant", "acme", *bad])  # fmt: skip
        assert out.exit_code == 2 and bad[0] in out.output, out.output
    out = runner.invoke(cli_app, ["--data", str(data), "search", "sister", "--tenant", "acme",
                                  "--mode", "semantic"])  # fmt: skip
    assert out.exit_code == ConfigurationError.exit_code and "embedder" in out.output


# ------------------------------------------------------------------ the console
async def test_the_console_offers_mode_and_match_and_keeps_them_in_its_links(store: Any) -> None:
    acme = store.scoped("acme")
    await _load(acme, [f"wedding {n} sister" if n % 2 else f"wedding {n}" for n in range(45)])
    transport = httpx.ASGITransport(app=console_app(store, OPERATORS))  # type: ignore[arg-type]
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://console.test") as client:

        async def get(**params: str) -> httpx.Response:
            query = urllib.parse.urlencode(params)
            return await client.get(f"/t/acme/search?{query}", headers=headers)

        page = (await get(q="sister wedding", match="all")).text
        assert '<option value="all" selected>' in page and '<option value="">default' in page
        assert 'id="total">22 messages match' in page
        nxt = html.unescape(re.search(r'class="next" href="([^"]+)"', page).group(1))  # type: ignore[union-attr]
        kept = urllib.parse.parse_qs(urllib.parse.urlsplit(nxt).query)
        assert kept["match"] == ["all"] and "cursor" in kept
        assert (await client.get(nxt, headers=headers)).status_code == 200
        anyway = (await get(q="sister wedding")).text
        assert 'id="total">45 messages match' in anyway
        for params, message in (
            ({"mode": "<b>x</b>"}, "mode: expected one of"),
            ({"match": "some"}, "match: expected one of"),
            ({"mode": "semantic"}, "this store has no embedder"),
        ):
            response = await get(q="wedding", **params)
            assert response.status_code == 400 and message in html.unescape(response.text)
            assert "<b>x</b>" not in response.text  # escaped
