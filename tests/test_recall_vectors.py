"""Recall by meaning (docs/search.md, "Recall by meaning") with the deterministic
`HashingEmbedder`: vectors written by the search's catch-up (an append still writes
nothing for search), their stored form, the scope and cursor of semantic and hybrid
searches, hostile arguments, a model change, a store without an embedder on the same
tenant, sealed vectors under a keyring, and every lifecycle path reaching the vectors.
The ranking is judged by an oracle that shares no code with it: a plain-Python cosine
over the embedder's own float vectors."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mindstore
from conftest import StoreFactory, close_store, open_store
from mindstore import Store
from mindstore.collection_names import SEARCH_ENTRIES, SEARCH_VECTORS
from mindstore.crypto import Keyring, LocalMasterKey
from mindstore.errors import ConfigurationError, KeyShredded, ValidationError
from mindstore.model.paging import PagePolicy
from mindstore.search import HashingEmbedder, embed_all
from mindstore.search.entries import chunk_indexes, entry_id, key_of, unpack_chunk
from mindstore.search.vectors import dequantise, quantise

SMALL_PAGES = PagePolicy(page_messages=3)

TEXTS = [
    "my sister got married in june",
    "the hotel booking in lisbon is confirmed",
    "weather forecast says rain tomorrow",
    "the wedding photos came out great",
    "refund for order 771 was issued",
    "deploy the new release to the server",
    "marriage licence paperwork at the town hall",
    "quarterly budget report is late",
]


def _embedded(store: Store, dimensions: int = 64, **options: Any) -> Store:
    return Store(store.backend, embedder=HashingEmbedder(dimensions), **options)


async def _entry_ids(store: Store, tenant: str = "acme") -> set[str]:
    """The names (`<task key>/<index>`) of the messages the tenant's entry chunks hold."""
    found = store.database[SEARCH_ENTRIES].find({"tenant": tenant})
    return {entry_id(key_of(c["_id"]), i) async for c in found for i in chunk_indexes(c)}


async def _fill(acme: mindstore.TenantStore, owner: str | None = None) -> list[str]:
    task = await acme.tasks.create(owner=owner)
    for n, text in enumerate(TEXTS):
        await acme.tasks.add_human_message(task.id, text, message_id=f"{owner or 'm'}{n}")
    return [f"{owner or 'm'}{n}" for n in range(len(TEXTS))]


def _oracle(query: str, texts: dict[str, str], dimensions: int = 64) -> list[str]:
    """Ids by cosine with the query, best first, from the embedder's float vectors."""
    embedder = HashingEmbedder(dimensions)
    wanted = embedder.vector(query)

    def cosine(text: str) -> float:
        vector = embedder.vector(text)
        norm = math.sqrt(sum(x * x for x in vector)) or 1.0
        return sum(a * b for a, b in zip(vector, wanted, strict=True)) / norm

    return sorted(texts, key=lambda m: -cosine(texts[m]))


async def _walk(acme: mindstore.TenantStore, query: str, limit: int, **options: Any) -> list[str]:
    seen: list[str] = []
    page = await acme.search(query, limit=limit, **options)
    while True:
        seen += [hit.message_id for hit in page.hits]
        if page.next_cursor is None:
            return seen
        page = await acme.search(query, limit=limit, cursor=page.next_cursor, **options)


async def test_semantic_ranks_as_an_exhaustive_cosine_and_pages_walk_it(
    stores: StoreFactory,
) -> None:
    store = _embedded(stores.store, page_policy=SMALL_PAGES)
    acme = store.scoped("acme")
    ids = await _fill(acme)
    texts = dict(zip(ids, TEXTS, strict=True))
    for query in ("married sister", "hotel in lisbon", "release deploy server"):
        page = await acme.search(query, mode="semantic", limit=len(TEXTS))
        got = [hit.message_id for hit in page.hits]
        expected = _oracle(query, texts)
        # int8 quantisation may swap near-ties: the best three agree as sets, the first exactly
        assert got[0] == expected[0] and set(got[:3]) == set(expected[:3]), query
        assert page.total == len(TEXTS) and sorted(got) == sorted(ids)
        assert await _walk(acme, query, 3, mode="semantic") == got
    hit = (await acme.search("married", mode="semantic", limit=1)).hits[0]
    assert hit.snippet.text == TEXTS[0] and hit.role == "user" and 0 < hit.score <= 1


async def test_default_mode_is_hybrid_with_an_embedder_and_lexical_without(
    stores: StoreFactory,
) -> None:
    plain = stores.sibling().scoped("acme")
    await _fill(plain)
    # lexical without an embedder: the default is what mode="lexical" gives, and with
    # every word required nothing holds both words
    assert await plain.search("sister wedding") == await plain.search(
        "sister wedding", mode="lexical"
    )
    assert (await plain.search("sister wedding", match="all")).hits == []
    with pytest.raises(ConfigurationError, match="embedder"):
        await plain.search("sister", mode="semantic")
    acme = _embedded(stores.store).scoped("acme")
    page = await acme.search("sister wedding")  # hybrid: finds by either ranking
    found = [hit.message_id for hit in page.hits]
    assert {"m0", "m3"} <= set(found[:3])
    assert await acme.search("sister wedding", mode="lexical") == await plain.search(
        "sister wedding"
    )


async def test_an_append_writes_nothing_for_search_and_a_search_embeds_in_batches(
    stores: StoreFactory,
) -> None:
    embedder = HashingEmbedder(32, batch_size=3)
    store = Store(stores.store.backend, embedder=embedder)
    acme = store.scoped("acme")
    task = await acme.tasks.create()
    with store.backend.recorder.capture() as log:
        for n in range(7):
            await acme.tasks.add_human_message(task.id, f"note number {n}")
    assert not [c for c in log if c.collection and c.collection.startswith("search")]
    assert embedder.calls == []
    assert len((await acme.search("note", mode="semantic", limit=10)).hits) == 7
    documents = [call for call in embedder.calls if call[1] == "document"]
    assert documents == [(3, "document"), (3, "document"), (1, "document")]
    stored = await store.database[SEARCH_VECTORS].find({"tenant": "acme"}).to_list(None)
    assert len(stored) == 7
    assert {len(bytes(d["v"])) for d in stored} == {2 + 32}  # int8: a byte a dimension
    # an unchanged tenant embeds only the query
    embedder.calls.clear()
    await acme.search("note", mode="semantic")
    assert embedder.calls == [(1, "query")]


async def test_scope_tenant_owner_roles_time_and_tasks(stores: StoreFactory) -> None:
    store = _embedded(stores.store)
    acme, globex = store.scoped("acme"), store.scoped("globex")
    alice = await _fill(acme, "alice")
    bob = await _fill(acme, "bob")
    await _fill(globex, "eve")
    for mode in ("semantic", "hybrid"):
        everyone = await _walk(acme, "wedding", 100, mode=mode)
        assert not {m for m in everyone if m.startswith("eve")}
        if mode == "semantic":
            assert sorted(everyone) == sorted(alice + bob)
        only = await _walk(store.scoped("acme", "alice"), "wedding", 100, mode=mode)
        assert only and set(only) <= set(alice)
        assert set(await _walk(acme, "wedding", 100, mode=mode, owner="bob")) <= set(bob)
        with pytest.raises(ValidationError, match="owner"):
            await store.scoped("acme", "alice").search("wedding", mode=mode, owner="bob")
        assert await _walk(acme, "wedding", 100, mode=mode, roles=["assistant"]) == []
        assert await _walk(acme, "wedding role:assistant", 100, mode=mode) == []
        later = datetime.now(UTC) + timedelta(days=1)
        assert await _walk(acme, "wedding", 100, mode=mode, since=later) == []
        assert await _walk(acme, "wedding", 100, mode=mode, until=later)
        assert await _walk(acme, "wedding", 100, mode=mode, task_ids=["nosuchtask"]) == []


async def test_cursors_are_bound_to_their_mode_query_scope_and_model(
    stores: StoreFactory,
) -> None:
    store = _embedded(stores.store)
    acme = store.scoped("acme")
    await _fill(acme)
    for mode in ("semantic", "hybrid"):
        cursor = (await acme.search("wedding", mode=mode, limit=2)).next_cursor
        assert cursor is not None
        for other in (
            {"mode": "semantic" if mode == "hybrid" else "hybrid"},
            {"mode": mode, "owner": "bob"},
        ):
            with pytest.raises(ValidationError, match="cursor"):
                await acme.search("wedding", limit=2, cursor=cursor, **other)
        with pytest.raises(ValidationError, match="cursor"):
            await acme.search("photos", mode=mode, limit=2, cursor=cursor)
        with pytest.raises(ValidationError, match="cursor"):
            await store.scoped("globex").search("wedding", mode=mode, limit=2, cursor=cursor)
        other_model = Store(store.backend, embedder=HashingEmbedder(48)).scoped("acme")
        with pytest.raises(ValidationError, match="cursor"):
            await other_model.search("wedding", mode=mode, limit=2, cursor=cursor)
        for forged in ("", "x" * 5000, cursor[:-3], "eyJ2IjoxfQ", "\udc80", 7):
            with pytest.raises(ValidationError, match="cursor"):
                await acme.search("wedding", mode=mode, cursor=forged)


async def test_appends_and_redactions_between_pages_repeat_no_hit(stores: StoreFactory) -> None:
    store = _embedded(stores.store, page_policy=SMALL_PAGES)
    acme = store.scoped("acme")
    task = await acme.tasks.create()
    for n in range(12):
        await acme.tasks.add_human_message(task.id, f"wedding plans part {n}", message_id=f"a{n}")
    for mode in ("semantic", "hybrid"):
        seen: list[str] = []
        page = await acme.search("wedding plans", mode=mode, limit=3)
        step = 0
        while True:
            seen += [hit.message_id for hit in page.hits]
            if page.next_cursor is None:
                break
            step += 1
            await acme.tasks.add_human_message(
                task.id, f"wedding plans part {step}", message_id=f"{mode}{step}"
            )
            if step == 2:
                await acme.tasks.redact(task.id, seen[0])
            page = await acme.search("wedding plans", mode=mode, limit=3, cursor=page.next_cursor)
        assert len(seen) == len(set(seen)), mode


@pytest.mark.parametrize(
    ("options", "name"),
    [
        ({"mode": "fuzzy"}, "mode"),
        ({"mode": 3}, "mode"),
        ({"mode": "semantic", "match": "some"}, "match"),
        ({"mode": "semantic", "limit": 0}, "limit"),
        ({"mode": "hybrid", "limit": 101}, "limit"),
        ({"mode": "semantic", "roles": ["boss"]}, "roles"),
        ({"mode": "hybrid", "task_ids": "abc"}, "task_ids"),
        ({"mode": "semantic", "since": "yesterday"}, "since"),
    ],
)
async def test_bad_arguments_are_typed_errors_before_any_io(
    stores: StoreFactory, options: dict[str, Any], name: str
) -> None:
    store = _embedded(stores.store)
    acme = store.scoped("acme")
    with store.backend.recorder.capture() as log, pytest.raises(ValidationError, match=name):
        await acme.search("wedding", **options)
    assert [c.name for c in log] == []


@pytest.mark.parametrize("query", ["", "x" * 5000, "lisbon \udfff", 7, None, "a\x00b"])
async def test_hostile_queries_are_typed_errors_in_every_mode(
    stores: StoreFactory, query: Any
) -> None:
    acme = _embedded(stores.store).scoped("acme")
    await _fill(acme)
    for mode in ("semantic", "hybrid"):
        with pytest.raises(ValidationError, match="query"):
            await acme.search(query, mode=mode)


@pytest.mark.parametrize(
    "query", ['{"$ne": 1}', "$where", ".*", "role:user wedding -hotel", '"a b"', "(a|b)+"]
)
async def test_operators_in_a_query_are_literal_text(stores: StoreFactory, query: str) -> None:
    acme = _embedded(stores.store).scoped("acme")
    await _fill(acme)
    for mode in ("semantic", "hybrid"):
        try:
            page = await acme.search(query, mode=mode, limit=100)
        except ValidationError as error:  # nothing to find in it: refused, never sent
            assert "query" in str(error)
            continue
        assert all(hit.role == "user" for hit in page.hits)
        if mode == "semantic":
            assert page.total == len(TEXTS)


async def test_a_model_change_reembeds_and_never_mixes_models(stores: StoreFactory) -> None:
    first = _embedded(stores.store, 64)
    acme = first.scoped("acme")
    ids = await _fill(acme)
    await acme.search("wedding", mode="semantic")
    second = Store(stores.store.backend, embedder=HashingEmbedder(48))
    other = second.scoped("acme")
    page = await other.search("wedding", mode="semantic", limit=100)
    assert sorted(hit.message_id for hit in page.hits) == sorted(ids)
    vectors = await second.database[SEARCH_VECTORS].find({"tenant": "acme"}).to_list(None)
    assert len(vectors) == len(ids) and {len(bytes(v["v"])) for v in vectors} == {2 + 48}
    stats = await second.database["search_postings"].find_one({"_id": "acme/"})
    assert stats is not None and stats["vm"] == "mindstore-hashing-v1-48@48"
    assert (await acme.search_index.verify()).ok


async def test_messages_indexed_by_a_store_without_an_embedder_are_embedded_later(
    stores: StoreFactory,
) -> None:
    plain = stores.sibling().scoped("acme")
    ids = await _fill(plain)
    assert await plain.search("wedding")  # indexed without vectors
    assert await stores.store.database[SEARCH_VECTORS].count_documents({}) == 0
    acme = _embedded(stores.store).scoped("acme")
    page = await acme.search("wedding", mode="semantic", limit=100)
    assert sorted(hit.message_id for hit in page.hits) == sorted(ids)
    more = await plain.tasks.create()
    await plain.tasks.add_human_message(more.id, "a late wedding toast", message_id="late")
    assert "late" in [h.message_id for h in (await plain.search("wedding")).hits]
    found = await acme.search("wedding toast", mode="semantic", limit=100)
    assert "late" in [hit.message_id for hit in found.hits]


async def test_concurrent_searches_embed_each_message_once(stores: StoreFactory) -> None:
    embedder = HashingEmbedder(32)
    views = [Store(stores.store.backend, embedder=embedder).scoped("acme") for _ in range(3)]
    await _fill(views[0])
    pages = await asyncio.gather(
        *(view.search("wedding", mode=mode) for view in views for mode in ("semantic", "hybrid"))
    )
    assert all(page.hits for page in pages)
    stored = await stores.store.database[SEARCH_VECTORS].find({}).to_list(None)
    assert len(stored) == len({d["_id"] for d in stored}) == len(TEXTS)
    assert {d["_id"] for d in stored} == await _entry_ids(stores.store)


async def test_a_failing_embedder_leaves_nothing_claimed(stores: StoreFactory) -> None:
    class Failing(HashingEmbedder):
        async def embed(self, texts: Any, *, purpose: Any) -> list[list[float]]:
            raise RuntimeError("provider down")

    acme = Store(stores.store.backend, embedder=Failing(32)).scoped("acme")
    await _fill(acme)
    with pytest.raises(RuntimeError, match="provider down"):
        await acme.search("wedding", mode="semantic")
    good = _embedded(stores.store, 32).scoped("acme")  # no claim to wait out
    assert len((await good.search("wedding", mode="semantic", limit=100)).hits) == len(TEXTS)


# ------------------------------------------------------------------ under a keyring
async def test_under_a_keyring_vectors_are_sealed_and_a_shred_ends_search(
    store_factory: Any,
) -> None:
    keyring = Keyring(LocalMasterKey(os.urandom(32)))
    store = await store_factory(keyring=keyring, embedder=HashingEmbedder(64))
    acme = store.scoped("acme")
    ids = await _fill(acme)
    texts = dict(zip(ids, TEXTS, strict=True))
    page = await acme.search("married sister", mode="semantic", limit=100)
    assert next(hit.message_id for hit in page.hits) == _oracle("married sister", texts)[0]
    stored = await store.database[SEARCH_VECTORS].find({"tenant": "acme"}).to_list(None)
    clear = {quantise(HashingEmbedder(64).vector(text)) for text in TEXTS}
    assert len(stored) == len(TEXTS)
    for document in stored:
        raw = bytes(document["v"])
        assert raw not in clear and document["v"].subtype != 9  # sealed, not a vector
    assert store.keyring is not None
    await store.keyring.shred("acme")
    with pytest.raises(KeyShredded):
        await acme.search("wedding", mode="semantic")
    assert await store.database[SEARCH_VECTORS].count_documents({"tenant": "acme"}) == 0


# ------------------------------------------------------------------ pure parts
@given(st.lists(st.floats(-1, 1, allow_nan=False), min_size=1, max_size=64))
@settings(max_examples=60, deadline=None)
def test_int8_quantisation_keeps_the_direction(values: list[float]) -> None:
    stored = quantise(values)
    back = dequantise(stored)
    assert len(stored) == 2 + len(values) and len(back) == len(values)
    norm = math.sqrt(sum(x * x for x in values))
    if norm < 1e-6:
        return
    top = max(abs(x) for x in values)
    # each component within half a step of the scaled original
    assert all(abs(b - x * 127 / top) <= 0.5 + 1e-9 for b, x in zip(back, values, strict=True))


async def test_embed_all_checks_what_an_embedder_returns() -> None:
    class Wrong(HashingEmbedder):
        def __init__(self, answer: list[list[float]]) -> None:
            super().__init__(3)
            self.answer = answer

        async def embed(self, texts: Any, *, purpose: Any) -> list[list[float]]:
            return self.answer

    for answer, message in (
        ([[1.0, 0.0]], "dimensions"),
        ([[1.0, 0.0, float("nan")]], "finite"),
        ([], "vectors for 1 texts"),
    ):
        with pytest.raises(ConfigurationError, match=message):
            await embed_all(Wrong(answer), ["x"], purpose="document")
    (unit,) = await embed_all(Wrong([[3.0, 4.0, 0.0]]), ["x"], purpose="query")
    assert unit == [0.6, 0.8, 0.0]
    with pytest.raises(ValidationError, match="purpose"):
        await embed_all(Wrong([]), ["x"], purpose="other")  # type: ignore[arg-type]


async def test_a_store_refuses_what_is_not_an_embedder() -> None:
    for bad in (object(), HashingEmbedder(0), HashingEmbedder(16, batch_size=0)):
        with pytest.raises(ConfigurationError, match="embedder"):
            await mindstore.connect("memory:", embedder=bad)  # type: ignore[arg-type]


def test_the_hashing_embedder_is_the_same_in_every_process() -> None:
    import subprocess
    import sys

    code = (
        "from mindstore.search import HashingEmbedder; "
        "print(HashingEmbedder(16).vector('wedding day'))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "123"}
    other = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert other.stdout.strip() == str(HashingEmbedder(16).vector("wedding day"))


def test_a_hypothesis_store_runs_hybrid_over_any_texts() -> None:
    """Any text either searches or is refused as a typed error, in every mode."""

    @given(st.lists(st.text(max_size=30), min_size=1, max_size=4))
    @settings(max_examples=15, deadline=None)
    def check(texts: list[str]) -> None:
        async def run() -> None:
            store = await open_store(embedder=HashingEmbedder(16))
            try:
                acme = store.scoped("acme")
                task = await acme.tasks.create()
                for text in texts:
                    with contextlib.suppress(ValidationError):
                        await acme.tasks.add_human_message(task.id, text or "x")
                for text in texts:
                    for mode in ("semantic", "hybrid"):
                        try:
                            page = await acme.search(text, mode=mode, limit=2)
                        except ValidationError as error:
                            assert "query" in str(error)
                            continue
                        if page.next_cursor is not None:
                            await acme.search(text, mode=mode, limit=2, cursor=page.next_cursor)
            finally:
                await close_store(store)

        asyncio.run(run())

    check()


async def test_the_round_trips_of_a_search_by_meaning(stores: StoreFactory) -> None:
    """An unchanged tenant: the change check, the vectors, the statistics, the texts;
    hybrid adds the lexical ranking (its change check, its postings riding on it, then its
    tasks' tables; it reads no text), then one read of the texts of the hits it returns
    (was two: the lexical ranking's hundred hits' and the vector-only hits')."""
    store = _embedded(stores.store)
    acme = store.scoped("acme")
    await _fill(acme)
    sent = {}
    for mode in ("semantic", "hybrid"):
        await acme.search("wedding", mode=mode)
        with store.backend.recorder.capture() as log:
            await acme.search("wedding", mode=mode)
        sent[mode] = [f"{c.collection}: {c.name}" for c in log for _ in range(c.round_trips)]
    assert sent["semantic"] == ["tasks: aggregate", "search_vectors: find",
                                "search_postings: find", "search_entries: find"]  # fmt: skip
    assert sent["hybrid"] == ["tasks: aggregate", "search_vectors: find", "search_postings: find",
                              "tasks: aggregate", "search_entries: find",
                              "search_entries: find"]  # fmt: skip


async def test_redactions_racing_searches_leave_no_vector_of_a_redacted_message(
    stores: StoreFactory,
) -> None:
    """Searches from three stores catch up (embedding) while a writer redacts and appends:
    afterwards no vector remains of a redacted message, and every other one has one."""
    views = [_embedded(stores.store, 32, page_policy=SMALL_PAGES).scoped("acme") for _ in range(3)]
    writer = views[0]
    tasks = [await writer.tasks.create() for _ in range(3)]
    for task in tasks:
        for n in range(6):
            await writer.tasks.add_human_message(
                task.id, f"wedding note {n}", message_id=f"{task.id}-{n}"
            )

    async def redact_and_append() -> None:
        for n in range(0, 6, 2):
            for task in tasks:
                await writer.tasks.redact(task.id, f"{task.id}-{n}")
                await writer.tasks.add_human_message(task.id, f"late wedding {n}")
                await asyncio.sleep(0)

    async def search(view: mindstore.TenantStore) -> None:
        for mode in ("semantic", "hybrid", "semantic"):
            await view.search("wedding", mode=mode)

    await asyncio.gather(redact_and_append(), *(search(view) for view in views))
    page = await views[1].search("wedding", mode="semantic", limit=100)
    found = {hit.message_id for hit in page.hits}
    redacted = {f"{task.id}-{n}" for task in tasks for n in range(0, 6, 2)}
    assert not found & redacted and len(found) == 3 * 3 + 3 * 3
    entries = await stores.store.database[SEARCH_ENTRIES].find({"tenant": "acme"}).to_list(None)
    vectors = await stores.store.database[SEARCH_VECTORS].find({"tenant": "acme"}).to_list(None)
    assert {v["_id"] for v in vectors} == await _entry_ids(stores.store)
    held = {m for chunk in entries for _, m, _ in unpack_chunk(chunk, bytes(chunk["z"]))}
    assert held and not held & redacted
