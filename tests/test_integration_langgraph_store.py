"""`MindstoreStore` (LangGraph's long-term memory store on mindstore): what LangGraph's own
store tests (tests/langgraph_store_upstream) do not cover: hostile input, the owner
scope, sealing under a keyring, backup and restore, erase, retention, shred, concurrency,
and filters judged against LangGraph's in-memory store as the oracle."""

from __future__ import annotations

import asyncio
import math
import os
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import InvalidNamespaceError, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore

import mindstore
from conftest import close_store, open_store
from mindstore.backup import backup, erase, restore, verify
from mindstore.backup.retention import erase_before
from mindstore.collection_names import MEMORY_ITEMS
from mindstore.crypto import Keyring, LocalMasterKey
from mindstore.crypto.aead import is_sealed, key_version
from mindstore.errors import CryptoError, KeyShredded, NotFound, ValidationError
from mindstore.integrations.langgraph_store import MindstoreStore, SyncFromLoop
from mindstore.memory import MemoryItems
from mindstore.store import Store


def keyring() -> Keyring:
    return Keyring(LocalMasterKey(os.urandom(32)))


async def stored(store: Store) -> list[dict[str, Any]]:
    return await store.database[MEMORY_ITEMS].find({}).sort("_id", 1).to_list(None)


# ----------------------------------------------------------------------------- input
@pytest.mark.parametrize(
    ("namespace", "error"),
    [
        ((), InvalidNamespaceError),
        (("a", ""), InvalidNamespaceError),
        (("a.b",), InvalidNamespaceError),
        (("a\x00",), InvalidNamespaceError),
        (("a", 1), InvalidNamespaceError),
        (("x" * 257,), ValidationError),
        (tuple("abcdefghijklmnopqrstuvwxyz0123456789"), ValidationError),
    ],
)
async def test_bad_namespaces_are_refused_and_write_nothing(
    store: Store, namespace: tuple[Any, ...], error: type[Exception]
) -> None:
    memories = MindstoreStore(store.scoped("acme"))
    with pytest.raises(error):
        await memories.aput(namespace, "k", {"v": 1})
    with pytest.raises(error):
        await memories.abatch([PutOp(namespace, "k", {"v": 1})])
    assert await stored(store) == []


@pytest.mark.parametrize(
    ("key", "value", "what"),
    [
        ("", {"v": 1}, "key"),
        ("k" * 1025, {"v": 1}, "key"),
        ("a\x00b", {"v": 1}, "key"),
        ("k", {"v": math.nan}, "finite"),
        ("k", {"v": math.inf}, "finite"),
        ("k", {"v": object()}, "JSON"),
        ("k", {"v": "x" * (1024 * 1024)}, "bytes"),
        ("k", ["not", "a", "mapping"], "mapping"),
    ],
)
async def test_bad_keys_and_values_are_typed_errors(
    store: Store, key: str, value: Any, what: str
) -> None:
    memories = MindstoreStore(store.scoped("acme"))
    await memories.aput(("ns",), "kept", {"v": 0})
    before = await stored(store)
    with pytest.raises(ValidationError, match=what):
        await memories.abatch([PutOp(("ns",), key, value)])
    assert await stored(store) == before


async def test_bad_filters_pages_and_ttls_are_typed_errors(store: Store) -> None:
    memories = MindstoreStore(store.scoped("acme"))
    await memories.aput(("ns",), "k", {"n": 1})
    before = await stored(store)
    deep: dict[str, Any] = {"n": 1}
    for _ in range(40):
        deep = {"n": deep}
    for bad in (
        {"n": {"$where": "1"}},
        {"n": {"$gt": "x"}},
        {"n": {"$lt": math.inf}},
        ["n"],
        deep,
        {"n": [[{"$regex": "."}]]},
    ):
        with pytest.raises(ValidationError):
            await memories.asearch(("ns",), filter=bad)  # type: ignore[arg-type]
    for limit, offset in ((-1, 0), (10, -1), (10_001, 0), (True, 0)):
        with pytest.raises(ValidationError):
            await memories.asearch(("ns",), limit=limit, offset=offset)
    for ttl in (0, -1.0, math.nan, math.inf, "5"):
        with pytest.raises(ValidationError):
            await memories.aput(("ns",), "t", {"n": 2}, ttl=ttl)  # type: ignore[arg-type]
    assert await stored(store) == before


async def test_user_data_is_never_an_operator(store: Store) -> None:
    """Keys with `$` and dots are data: stored and given back as they are, and a filter
    field named like an operator or a dotted path names that literal key."""
    memories = MindstoreStore(store.scoped("acme"))
    value = {"$where": "sleep(1)", "a.b": 1, "$ref": {"$id": 2, "x.y": [{"$gt": 0}]}}
    await memories.aput(("ns",), "odd", value)
    await memories.aput(("ns",), "plain", {"a": {"b": 1}, "$where": "other"})
    assert (await memories.aget(("ns",), "odd")).value == value  # type: ignore[union-attr]
    found = await memories.asearch(("ns",), filter={"a.b": 1})
    assert [item.key for item in found] == ["odd"]
    found = await memories.asearch(("ns",), filter={"$where": "sleep(1)"})
    assert [item.key for item in found] == ["odd"]
    found = await memories.asearch(("ns",), filter={"a": {"b": 1}})
    assert [item.key for item in found] == ["plain"]
    # in a filter, a mapping of `$` keys is LangGraph's operator syntax: an unknown one
    # is refused, never passed on
    with pytest.raises(ValidationError, match=r"\$id"):
        await memories.asearch(("ns",), filter={"$ref": {"$id": 2}})
    # nothing of the value reaches a query: it is stored as bytes
    for document in await stored(store):
        assert isinstance(document["v"], bytes)


def test_sync_call_on_the_running_loop_is_refused() -> None:
    async def main() -> None:
        opened = await open_store()
        try:
            memories = MindstoreStore(opened.scoped("acme"))
            with pytest.raises(SyncFromLoop):
                memories.put(("ns",), "k", {"v": 1})
            with pytest.raises(asyncio.InvalidStateError):
                memories.get(("ns",), "k")
            assert await stored(opened) == []
        finally:
            await close_store(opened)

    asyncio.run(main())


# ----------------------------------------------------------------------------- filters
LEAVES = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5), st.sampled_from([0.5, 2.5]),
    st.sampled_from(["a", "b", "$x", "a.b"]),
)  # fmt: skip
FIELDS = st.sampled_from(["n", "s", "$op", "a.b", "nested"])
VALUES = st.dictionaries(
    FIELDS,
    st.one_of(LEAVES, st.dictionaries(st.sampled_from(["k", "$k"]), LEAVES, max_size=2),
              st.lists(LEAVES, max_size=2)),
    max_size=4,
)  # fmt: skip
CONDITIONS = st.one_of(
    LEAVES,
    st.dictionaries(st.sampled_from(["$eq", "$ne"]), LEAVES, min_size=1, max_size=2),
    st.dictionaries(
        st.sampled_from(["$gt", "$gte", "$lt", "$lte"]), st.integers(-5, 5), min_size=1,
        max_size=2,
    ),
    st.dictionaries(st.sampled_from(["k"]), LEAVES, min_size=1, max_size=1),
)  # fmt: skip


def _oracle_keys(values: list[dict[str, Any]], filter: dict[str, Any]) -> set[str]:
    """LangGraph's in-memory store on the same items and filter. Its range operators
    raise on a missing or non-numeric field (`float(None)`); mindstore counts such an item
    as not passing, so the oracle runs on the items whose fields the ranges can read."""
    reference = InMemoryStore()
    for index, value in enumerate(values):
        reference.put(("ns",), str(index), value)
    return {item.key for item in reference.search(("ns",), filter=filter, limit=100)}


def _ranges_readable(values: list[dict[str, Any]], filter: dict[str, Any]) -> bool:
    for field, condition in filter.items():
        if isinstance(condition, dict) and {"$gt", "$gte", "$lt", "$lte"} & set(condition):
            for value in values:
                held = value.get(field)
                if isinstance(held, bool) or not isinstance(held, (int, float)):
                    return False
    return True


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(VALUES, max_size=6), filter=st.dictionaries(FIELDS, CONDITIONS, max_size=2))
def test_filters_agree_with_langgraphs_in_memory_store(
    values: list[dict[str, Any]], filter: dict[str, Any]
) -> None:
    async def main() -> set[str]:
        opened = await open_store()
        try:
            memories = MindstoreStore(opened.scoped("acme"))
            for index, value in enumerate(values):
                await memories.aput(("ns",), str(index), value)
            for index, value in enumerate(values):  # a round trip, whatever the keys
                assert (await memories.aget(("ns",), str(index))).value == value  # type: ignore[union-attr]
            found = await memories.asearch(("ns",), filter=filter, limit=100)
            return {item.key for item in found}
        finally:
            await close_store(opened)

    found = asyncio.run(main())
    if _ranges_readable(values, filter):
        assert found == _oracle_keys(values, filter)


# ----------------------------------------------------------------------------- scope
async def test_owner_scope_hides_and_protects_another_owners_items(store: Store) -> None:
    ana = MindstoreStore(store.scoped("acme", owner="ana"))
    bob = MindstoreStore(store.scoped("acme", owner="bob"))
    other_tenant = MindstoreStore(store.scoped("globex"))
    await ana.aput(("memories",), "diet", {"text": "vegetarian"})
    assert await bob.aget(("memories",), "diet") is None
    assert await bob.asearch(("memories",)) == []
    assert await bob.alist_namespaces() == []
    assert await other_tenant.aget(("memories",), "diet") is None
    with pytest.raises(NotFound):
        await bob.aput(("memories",), "diet", {"text": "overwritten"})
    await bob.adelete(("memories",), "diet")  # not bob's: nothing happens
    assert (await ana.aget(("memories",), "diet")).value == {"text": "vegetarian"}  # type: ignore[union-attr]
    tenant = MindstoreStore(store.scoped("acme"))
    assert [i.key for i in await tenant.asearch(("memories",))] == ["diet"]


async def test_owner_label_names_the_owner_and_must_be_an_owner_id(store: Store) -> None:
    memories = MindstoreStore(store.scoped("acme"), owner_label=1)
    await memories.aput(("memories", "ana"), "k", {"v": 1})
    await memories.aput(("shared",), "k", {"v": 2})  # too short to name one: the tenant's
    owners = {tuple(d["ns"]): d.get("owner") for d in await stored(store)}
    assert owners == {("memories", "ana"): "ana", ("shared",): None}
    with pytest.raises(ValidationError, match="owner"):
        await memories.aput(("memories", "$bad"), "k", {"v": 3})
    with pytest.raises(ValidationError):
        MindstoreStore(store.scoped("acme"), owner_label=-1)


# ----------------------------------------------------------------------------- lifecycle
async def fill(store: Store) -> None:
    """acme: ana's and bob's memories (owner label 1) and a shared one; globex: one."""
    acme = MindstoreStore(store.scoped("acme"), owner_label=1)
    await acme.aput(("memories", "ana"), "diet", {"text": "vegetarian"})
    await acme.aput(("memories", "ana"), "city", {"text": "Lyon"}, index=False)
    await acme.aput(("memories", "bob"), "diet", {"text": "vegan"})
    await acme.aput(("shared",), "policy", {"text": "be brief"})
    owned = MindstoreStore(store.scoped("acme", owner="carol"))
    await owned.aput(("notes",), "n1", {"text": "carol's"})
    await MindstoreStore(store.scoped("globex")).aput(("memories",), "k", {"text": "other"})


def keys_of(documents: list[dict[str, Any]]) -> set[tuple[str, tuple[str, ...], str]]:
    return {(d["tenant"], tuple(d["ns"]), d["k"]) for d in documents}


async def test_backup_restore_round_trip_keeps_the_items(
    store: Store, store_factory: Any, tmp_path: Path
) -> None:
    await fill(store)
    before = await stored(store)
    manifest = await backup(store, tmp_path / "all")
    assert manifest.format_version == 5
    assert manifest.collections[MEMORY_ITEMS].count == len(before) == 6
    await verify(tmp_path / "all")
    fresh = await store_factory()
    await restore(fresh, tmp_path / "all")
    assert await stored(fresh) == before
    ana = MindstoreStore(fresh.scoped("acme"))
    assert (await ana.aget(("memories", "ana"), "diet")).value == {"text": "vegetarian"}  # type: ignore[union-attr]
    # an owner's backup holds that owner's items only
    owner_backup = await backup(store, tmp_path / "ana", tenant="acme", owner="ana")
    assert owner_backup.collections[MEMORY_ITEMS].count == 2
    await verify(tmp_path / "ana")
    # restored as another tenant: the items move with it
    moved = await store_factory()
    await restore(moved, tmp_path / "ana", as_tenant="initech")
    got = await MindstoreStore(moved.scoped("initech")).aget(("memories", "ana"), "city")
    assert got is not None and got.value == {"text": "Lyon"}


async def test_owner_erase_reaches_the_owners_items_only(store: Store) -> None:
    await fill(store)
    receipt = await erase(store, "acme", owner="ana")
    assert receipt.counts[MEMORY_ITEMS] == 2
    await erase(store, "acme", owner="carol")
    assert keys_of(await stored(store)) == {
        ("acme", ("memories", "bob"), "diet"),
        ("acme", ("shared",), "policy"),
        ("globex", ("memories",), "k"),
    }


async def test_tenant_erase_reaches_every_item_of_the_tenant(store: Store) -> None:
    await fill(store)
    dry = await erase(store, "acme", dry_run=True)
    assert dry.counts[MEMORY_ITEMS] == 5
    assert len(await stored(store)) == 6
    await erase(store, "acme")
    assert keys_of(await stored(store)) == {("globex", ("memories",), "k")}


async def test_retention_reaches_items_not_written_since(store: Store) -> None:
    clock = [mindstore.clock.utcnow() - timedelta(days=40)]
    old = MindstoreStore(store.scoped("acme"), clock=lambda: clock[0])
    await old.aput(("memories",), "old", {"v": 1})
    await old.aput(("memories",), "rewritten", {"v": 1})
    clock[0] = mindstore.clock.utcnow()
    await old.aput(("memories",), "rewritten", {"v": 2})
    await old.aput(("memories",), "new", {"v": 3})
    receipt = await erase_before(store, "acme", before=timedelta(days=30))
    assert receipt.counts[MEMORY_ITEMS] == 1
    assert {d["k"] for d in await stored(store)} == {"rewritten", "new"}


async def test_items_are_sealed_and_a_shred_makes_them_unreadable(store_factory: Any) -> None:
    sealed = await store_factory(keyring=keyring())
    memories = MindstoreStore(
        sealed.scoped("acme"), index={"dims": 2, "embed": lambda texts: [[1.0, 0.0]] * len(texts)}
    )
    await memories.aput(("memories",), "secret", {"text": "my PIN is 4321"})
    document = (await stored(sealed))[0]
    assert is_sealed(document["v"]) and is_sealed(document["e"]) and document["z"] is True
    assert b"4321" not in bytes(document["v"])
    found = await memories.asearch(("memories",), query="pin")
    assert [item.value for item in found] == [{"text": "my PIN is 4321"}]
    # moved to another item, a ciphertext does not open
    copy = {**document, "_id": document["_id"][:-1] + "0", "k": "copy"}
    await sealed.database[MEMORY_ITEMS].insert_one(copy)
    with pytest.raises(CryptoError, match="not sealed there"):
        await memories.asearch(("memories",))
    await sealed.database[MEMORY_ITEMS].delete_one({"_id": copy["_id"], "tenant": "acme"})
    await sealed.keyring.shred("acme")
    with pytest.raises(KeyShredded):
        await memories.aget(("memories",), "secret")
    with pytest.raises(KeyShredded):
        await memories.asearch(("memories",))
    with pytest.raises(KeyShredded):
        await memories.aput(("memories",), "again", {"text": "refused"})


async def test_shred_erases_items_stored_in_the_clear(store: Store) -> None:
    plain = MindstoreStore(store.scoped("acme"))
    await plain.aput(("memories",), "early", {"text": "before encryption"})
    sealed_store = Store(store.backend, keyring=keyring())
    sealed = MindstoreStore(sealed_store.scoped("acme"))
    await sealed.aput(("memories",), "later", {"text": "sealed"})
    assert {d["k"]: d.get("z") for d in await stored(store)} == {"early": None, "later": True}
    await sealed_store.keyring.shred("acme")  # type: ignore[union-attr]
    assert [d["k"] for d in await stored(store)] == ["later"]
    with pytest.raises(KeyShredded):
        await sealed.aget(("memories",), "later")


# ----------------------------------------------------------------------------- TTL
async def test_ttl_expiry_refresh_and_sweep(store: Store) -> None:
    now = [mindstore.clock.utcnow()]
    memories = MindstoreStore(
        store.scoped("acme"), ttl={"default_ttl": 1.0, "omit_expired": True}, clock=lambda: now[0]
    )
    await memories.aput(("ns",), "read", {"v": 1})
    await memories.aput(("ns",), "unread", {"v": 2})
    await memories.aput(("ns",), "forever", {"v": 3}, ttl=None)
    now[0] += timedelta(seconds=45)
    assert await memories.aget(("ns",), "read") is not None  # refreshed: 60 s from now
    now[0] += timedelta(seconds=30)
    assert await memories.aget(("ns",), "unread", refresh_ttl=False) is None  # expired
    assert {i.key for i in await memories.asearch(("ns",), refresh_ttl=False)} == {
        "read", "forever",
    }  # fmt: skip
    assert await memories.asweep_ttl() == 1
    assert {d["k"] for d in await stored(store)} == {"read", "forever"}


# ----------------------------------------------------------------------------- concurrency
async def test_concurrent_puts_lose_nothing(store: Store) -> None:
    writers = [MindstoreStore(Store(store.backend).scoped("acme")) for _ in range(4)]
    await asyncio.gather(*(
        writers[i % 4].aput(("ns", str(i % 3)), f"k{i}", {"i": i}) for i in range(60)
    ))  # fmt: skip
    same = [{"writer": w} for w in range(20)]
    await asyncio.gather(*(writers[w % 4].aput(("ns",), "same", v) for w, v in enumerate(same)))
    reader = writers[0]
    for i in range(60):
        assert (await reader.aget(("ns", str(i % 3)), f"k{i}")).value == {"i": i}  # type: ignore[union-attr]
    last = await reader.aget(("ns",), "same")
    assert last is not None and last.value in same
    assert len(await stored(store)) == 61  # one document per (namespace, key)


def test_sync_puts_from_threads_lose_nothing() -> None:
    async def opened() -> Store:
        return await open_store()

    shared = asyncio.run(opened())
    memories = MindstoreStore(shared.scoped("acme"))
    errors: list[BaseException] = []

    def work(thread: int) -> None:
        try:
            for i in range(8):
                memories.put(("ns",), f"t{thread}-{i}", {"i": i})
                memories.put(("ns",), "same", {"thread": thread, "i": i})
        except BaseException as error:  # pragma: no cover - shown by the assert
            errors.append(error)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    found = memories.search(("ns",), limit=100)
    assert {item.key for item in found} == {f"t{t}-{i}" for t in range(4) for i in range(8)} | {
        "same"
    }
    asyncio.run(close_store(shared))


async def test_batch_runs_in_order_and_embeds_once(store: Store) -> None:
    calls: list[int] = []

    def embed(texts: list[str]) -> list[list[float]]:
        calls.append(len(texts))
        return [[float(len(t)), 1.0] for t in texts]

    memories = MindstoreStore(store.scoped("acme"), index={"dims": 2, "embed": embed})
    results = await memories.abatch([
        PutOp(("ns",), "a", {"text": "aa"}),
        PutOp(("ns",), "b", {"text": "bbbb"}),
        SearchOp(("ns",), limit=10),
        PutOp(("ns",), "a", None),
        SearchOp(("ns",), limit=10),
    ])  # fmt: skip
    assert calls == [2]  # both puts' texts in one call
    assert {i.key for i in results[2]} == {"a", "b"}  # type: ignore[union-attr]
    assert [i.key for i in results[4]] == ["b"]  # type: ignore[union-attr]


async def test_reencrypt_seals_items_stored_in_the_clear_and_after_a_rotation(
    store: Store,
) -> None:
    index = {"dims": 2, "embed": lambda texts: [[1.0, float(len(t))] for t in texts]}
    plain = MindstoreStore(store.scoped("acme"), index=index)  # type: ignore[arg-type]
    await plain.aput(("memories",), "early", {"text": "before encryption"})
    sealed_store = Store(store.backend, keyring=keyring())
    ring = sealed_store.keyring
    assert ring is not None
    sealed = MindstoreStore(sealed_store.scoped("acme"), index=index)  # type: ignore[arg-type]
    await sealed.aput(("memories",), "later", {"text": "sealed at once"})
    await ring.reencrypt("acme")  # the tenant is sealed-only from here on
    documents = await stored(store)
    assert all(is_sealed(d["v"]) and is_sealed(d["e"]) and d["z"] is True for d in documents)
    assert (await sealed.aget(("memories",), "early")).value == {"text": "before encryption"}  # type: ignore[union-attr]
    await ring.rotate("acme")
    await ring.reencrypt("acme")
    newest = max((await ring.keys("acme")).keys)
    for document in await stored(store):
        assert key_version(document["v"]) == newest == key_version(document["e"])
    found = await sealed.asearch(("memories",), query="anything")
    assert {item.key for item in found} == {"early", "later"}


async def test_memory_items_read_api_outside_langgraph(store: Store) -> None:
    """What another reader (an MCP tool over a namespace's memories) uses: the same items,
    scope and filters, read without writing anything (no TTL refresh)."""
    now = [mindstore.clock.utcnow()]
    writer = MindstoreStore(store.scoped("acme", owner="ana"), clock=lambda: now[0])
    await writer.aput(("memories",), "diet", {"text": "vegetarian", "n": 2}, ttl=5.0)
    await writer.aput(("memories", "work"), "city", {"text": "Lyon", "n": 1})
    before = await stored(store)
    items = MemoryItems.of(store, "acme", owner="ana")
    found = await items.search(("memories",), filter={"n": {"$gte": 2}})
    assert [(e.item.namespace, e.item.key, e.item.value) for e in found] == [
        (("memories",), "diet", {"text": "vegetarian", "n": 2})
    ]
    assert (await items.get(("memories", "work"), "city")).value["text"] == "Lyon"  # type: ignore[union-attr]
    assert await items.namespaces() == [("memories",), ("memories", "work")]
    assert await MemoryItems.of(store, "acme", owner="bob").search(("memories",)) == []
    assert await stored(store) == before  # nothing written, expiry untouched


@pytest.mark.parametrize("distance", ["cosine", "l2", "inner_product"])
async def test_each_distance_ranks_as_its_formula(store: Any, distance: str) -> None:
    """Scores and order by each `distance_type`, against the formula written out here."""
    vectors = {"a": [1.0, 0.0], "b": [3.0, 3.0], "c": [-1.0, 0.5]}  # no ties in any order
    query = [2.0, 1.0]

    def embed(texts: list[str]) -> list[list[float]]:
        return [query if text == "q" else vectors[text] for text in texts]

    memories = MindstoreStore(
        store.scoped("acme"), index={"dims": 2, "embed": embed, "distance_type": distance}
    )
    for key in vectors:
        await memories.aput(("n",), key, {"text": key}, index=["text"])
    found = await memories.asearch(("n",), query="q")

    def expected(v: list[float]) -> float:
        dot = sum(a * b for a, b in zip(query, v, strict=True))
        if distance == "inner_product":
            return dot
        if distance == "l2":
            return -math.dist(query, v)
        return dot / (math.hypot(*query) * math.hypot(*v))

    want = sorted(vectors, key=lambda k: -expected(vectors[k]))
    assert [item.key for item in found] == want
    for item in found:
        assert item.score == pytest.approx(expected(vectors[item.key]), rel=1e-5)
    with pytest.raises(ValidationError, match="distance_type"):
        MindstoreStore(store.scoped("acme"), index={"dims": 2, "embed": embed,
                                                   "distance_type": "manhattan"})  # fmt: skip
