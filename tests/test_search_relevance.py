"""Relevance judged against an independent BM25 engine (bm25s, Lucene's formula).

A seeded corpus of 20,100 messages over three tenants (agent turns with tool calls, five
languages), inserted with one create per task; 200 conjunctive queries drawn from the
tenants' own messages. For each query the reference ranks every message of the tenant
that holds all the query's words by bm25s's score over the tenant's whole corpus; the
search's top 10 must agree with it at 0.9 on average (overlap@10, ties counted as
agreeing), and the search must find every such message (recall 1.0). The corpus and all
searches run once per module."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import bm25s
import numpy as np
import pytest

import mindstore
from conftest import TEST_URI
from mindstore import clock
from mindstore.model.paging import PagePolicy
from mindstore.search.text import searchable
from mindstore.search.tokenize import terms
from search_corpus import CONFIG, FILLER, corpus

TENANTS = ("acme", "globex", "initech")
TASKS_PER_TENANT = 100
MESSAGES_PER_TASK = 67
QUERIES = 200


@dataclass
class Judged:
    overlaps: list[float]
    recalls: list[float]
    queries: list[str]
    messages: int


STOPWORDS = frozenset(FILLER)
MAX_MATCHES = 400
"""Queries people type name what they look for: drawn words skip the filler words, and
a draw matching more messages than this is drawn again (every match is then paged
through to check recall)."""


def _queries(
    rng: random.Random, documents: list[list[str]], holding: dict[str, set[int]], count: int
) -> list[list[str]]:
    """Conjunctive queries of 1 to 3 distinct words taken from one message each."""
    out: list[list[str]] = []
    while len(out) < count:
        words = sorted(set(rng.choice(documents)) - STOPWORDS)
        if not words:
            continue
        query = rng.sample(words, min(len(words), rng.randint(1, 3)))
        if len(set.intersection(*(holding[w] for w in query))) <= MAX_MATCHES:
            out.append(query)
    return out


async def _judge() -> Judged:
    # ranking does not depend on paging (tests/test_search.py reads sealed pages): the
    # default page size at both of the suite's page sizes keeps this module's cost fixed
    store = await mindstore.connect(
        TEST_URI or "embedded", database="mindstore_test_relevance", page_policy=PagePolicy()
    )
    rng = random.Random(39)
    judged = Judged([], [], [], 0)
    # a history: the conversations were written ten minutes apart over the past days, so
    # a search's change check meets the last ones only, as it would in production
    start, now = datetime.now(UTC) - timedelta(days=7), clock._now
    minutes = itertools.count()

    def history() -> datetime:
        return (start + timedelta(minutes=10 * next(minutes))).replace(microsecond=0)

    try:
        for number, tenant in enumerate(TENANTS):
            view = store.scoped(tenant)
            conversations = corpus(number, TASKS_PER_TENANT, MESSAGES_PER_TASK)
            ids: list[str] = []
            documents: list[list[str]] = []
            clock._now = history
            for conversation in conversations:
                record = await view.tasks.create(owner=conversation.owner, config=CONFIG,
                                                 messages=conversation.messages)  # fmt: skip
                for message in conversation.messages:
                    words = terms(searchable(message).text)
                    if words or searchable(message).tools:
                        ids.append(f"{record.id}/{message.id}")
                        documents.append(words)
                judged.messages += len(conversation.messages)
            clock._now = now
            reference = bm25s.BM25(method="lucene", k1=1.2, b=0.75)
            reference.index(documents, show_progress=False)
            holding: dict[str, set[int]] = defaultdict(set)
            for n, words in enumerate(documents):
                for word in words:
                    holding[word].add(n)
            share = QUERIES // len(TENANTS) + (1 if number < QUERIES % len(TENANTS) else 0)
            for query in _queries(rng, documents, holding, share):
                matching = set.intersection(*(holding[w] for w in query))
                scores = reference.get_scores(query)
                expected = {ids[n] for n in matching}
                # the first page of 100 holds the top 10 (ranking does not depend on the
                # limit) and is the first page of the recall check: one search less
                page = await view.search(" ".join(query), limit=100, match="all")
                every = {f"{h.task_id}/{h.message_id}" for h in page.hits}
                found = [f"{h.task_id}/{h.message_id}" for h in page.hits[:10]]
                ranked = sorted(matching, key=lambda n: -scores[n])
                tenth = scores[ranked[min(9, len(ranked) - 1)]]
                by_id = {ids[n]: scores[n] for n in matching}
                agree = sum(1 for f in found if f in by_id and by_id[f] >= tenth - 1e-6)
                judged.overlaps.append(agree / min(10, len(matching)))
                cursor = page.next_cursor
                while cursor is not None:
                    more = await view.search(" ".join(query), limit=100, cursor=cursor, match="all")
                    every |= {f"{h.task_id}/{h.message_id}" for h in more.hits}
                    cursor = more.next_cursor
                judged.recalls.append(len(every & expected) / len(expected))
                assert page.total == len(expected) and every <= expected, query
                judged.queries.append(" ".join(query))
    finally:
        clock._now = now
        if TEST_URI:
            await store.backend.client.drop_database("mindstore_test_relevance")
        await store.close()
    return judged


@pytest.fixture(scope="module")
def judged() -> Judged:
    return asyncio.run(_judge())


def test_the_corpus_is_large_and_the_queries_many(judged: Judged) -> None:
    assert judged.messages >= 20_000 and len(judged.queries) == QUERIES


def test_the_top_ten_agree_with_an_independent_bm25(judged: Judged) -> None:
    print(f"overlap@10 mean {np.mean(judged.overlaps):.4f} min {min(judged.overlaps):.2f}")
    assert float(np.mean(judged.overlaps)) >= 0.9


def test_every_message_holding_all_the_words_is_found(judged: Judged) -> None:
    assert min(judged.recalls) == 1.0
