"""Hostile queries at the API (docs/search.md, "The query language"): a lone surrogate
anywhere is a `ValidationError` naming the query, refused before any I/O, the stored data
unchanged; any text either searches or is refused so, never another error."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mindstore
from conftest import close_store, open_store
from mindstore.collection_names import SEARCH_ENTRIES, SEARCH_POSTINGS, SEARCH_TASKS
from mindstore.errors import ValidationError


async def _index(store: mindstore.Store) -> list[list[dict[str, Any]]]:
    return [await store.database[name].find({}).to_list(None)
            for name in (SEARCH_POSTINGS, SEARCH_ENTRIES, SEARCH_TASKS)]  # fmt: skip


@pytest.mark.parametrize(
    "query", ["tool:\udc80", "tool:get_\ud800weather x", "lisbon \udfff", '"hotel \ud83d"',
              "-\udc80 lisbon", "role:\udc80 lisbon"],
)  # fmt: skip
async def test_a_lone_surrogate_anywhere_is_a_typed_error(acme: Any, query: str) -> None:
    task = await acme.tasks.create()
    await acme.tasks.add_human_message(task.id, "lisbon hotel")
    assert (await acme.search("lisbon")).hits
    before = await _index(acme.store)
    refused = pytest.raises(ValidationError, match="query holds a lone surrogate")
    with acme.store.backend.recorder.capture() as log, refused:
        await acme.search(query)
    assert [c.name for c in log] == []  # refused before any I/O
    assert await _index(acme.store) == before


async def test_an_owner_filter_is_a_name(acme: Any) -> None:
    for owner in ("\udc80", "$ne", "", 7):
        with pytest.raises(ValidationError, match="owner"):
            await acme.search("word", owner=owner)


TEXT = st.lists(
    st.characters(blacklist_categories=())
    | st.sampled_from(["tool:", "role:user", "-", '"', " ", "\u202e", "\u200d", "々", "が"]),
    max_size=20,
).map("".join)


@settings(max_examples=25, deadline=None)
@given(st.lists(TEXT, min_size=1, max_size=4))
def test_any_text_searches_or_is_refused_as_a_typed_error(queries: list[str]) -> None:
    """Through a store: index, rank, snippets, pages."""

    async def run() -> None:
        store = await open_store()
        try:
            acme = store.scoped("acme")
            task = await acme.tasks.create()
            for text in queries:  # the texts are messages too: the terms meet
                with contextlib.suppress(ValidationError):  # text no message may hold
                    await acme.tasks.add_human_message(task.id, text or "x")
            for query in queries:
                try:
                    page = await acme.search(query, limit=2)
                except ValidationError as error:
                    assert "query" in str(error)
                    continue
                if page.next_cursor is not None:
                    await acme.search(query, limit=2, cursor=page.next_cursor)
        finally:
            await close_store(store)

    asyncio.run(run())
