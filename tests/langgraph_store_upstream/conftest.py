"""The vendored LangGraph store tests' one hook into the suite: `MindstoreStore`s on the
suite's `store` fixture, each on a tenant of its own (an `InMemoryStore()` is empty), a
clock the TTL tests move instead of sleeping, and the Postgres files' `store` and
`vector_store` fixtures swapped onto mindstore."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from mindstore import Store
from mindstore.integrations.langgraph_store import MindstoreStore

from .embed_test_utils import CharacterEmbeddings

_current: list[Store] = []
_tenants = iter(range(1_000_000))


class Clock:
    """The stores' "now": a millisecond later at each reading (as a real clock between
    two writes), moved by the TTL tests' `sleep` (no real waiting)."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


CLOCK = Clock()


def make_store(**options: Any) -> MindstoreStore:
    """A `MindstoreStore` on a fresh tenant of the running test's mindstore store, on the
    shared clock (`options`: `index`, `ttl`, as LangGraph's stores take them)."""
    view = _current[-1].scoped(f"t{next(_tenants)}")
    return MindstoreStore(view, clock=CLOCK, **options)


@pytest.fixture(autouse=True)
def _mindstore_of_the_test(store: Any) -> Iterator[None]:
    # `store` here is the suite's mindstore Store (the Postgres files' own `store`
    # fixture, below, overrides the name for their tests and requests it first)
    if isinstance(store, Store):
        _current.append(store)
    try:
        yield
    finally:
        if isinstance(store, Store):
            _current.pop()


@pytest.fixture
def fake_embeddings() -> CharacterEmbeddings:
    return CharacterEmbeddings(dims=500)


# ---------------------------------------------------------------- the Postgres files' swap
VECTOR_TYPES = ["vector", "halfvec"]
"""pgvector's column types: mindstore stores float32 vectors whatever the type named."""
_made: list[MindstoreStore] = []


@contextmanager
def mindstore_fixture_store(store: Store, **options: Any) -> Iterator[MindstoreStore]:
    """The Postgres files' `store` fixture: a `MindstoreStore` on the suite's `store`."""
    _current.append(store)
    try:
        made = make_store(**options)
        _made.append(made)
        yield made
    finally:
        for each in _made:  # as leaving PostgresStore's context does: no sweeper outlives
            each.stop_ttl_sweeper()  # its test (a leaked one sweeps while others record)
        _made.clear()
        _current.pop()


@contextmanager
def vector_store_of(index: dict[str, Any], ttl: dict[str, Any] | None) -> Iterator[MindstoreStore]:
    """`_create_vector_store`: a store with `index` (cosine, l2 or inner_product)."""
    made = make_store(index=index, ttl=ttl)
    _made.append(made)
    yield made


def _document(store: MindstoreStore, ns: tuple[str, ...], key: str) -> dict[str, Any]:
    return {"_id": store.items.doc_id(ns, key), "tenant": store.items.tenant}


async def aexpire_now(store: MindstoreStore, ns: tuple[str, ...], key: str) -> None:
    """Move an item's expiry a minute into the past, unswept (the `expires_at` update)."""
    await store.items.collection.update_one(
        _document(store, ns, key), {"$set": {"x": CLOCK() - timedelta(minutes=1)}}
    )


async def arow_exists(store: MindstoreStore, ns: tuple[str, ...], key: str) -> bool:
    return await store.items.collection.count_documents(_document(store, ns, key)) == 1


async def astored_expires_at(store: MindstoreStore, ns: tuple[str, ...], key: str) -> Any:
    found = await store.items.collection.find_one(_document(store, ns, key), {"x": 1})
    return None if found is None else found.get("x")


async def abackdate_updates(
    store: MindstoreStore, ns: tuple[str, ...], seconds_ago: dict[str, float]
) -> None:
    """Set items' `updated_at` to now minus so many seconds (the SQL update's swap)."""
    for key, seconds in seconds_ago.items():
        await store.items.collection.update_one(
            _document(store, ns, key),
            {"$set": {"updated_at": CLOCK() - timedelta(seconds=seconds)}},
        )


def expire_now(store: MindstoreStore, ns: tuple[str, ...], key: str) -> None:
    asyncio.run(aexpire_now(store, ns, key))


def row_exists(store: MindstoreStore, ns: tuple[str, ...], key: str) -> bool:
    return asyncio.run(arow_exists(store, ns, key))


def stored_expires_at(store: MindstoreStore, ns: tuple[str, ...], key: str) -> Any:
    return asyncio.run(astored_expires_at(store, ns, key))


def backdate_updates(store: MindstoreStore, ns: tuple[str, ...], ago: dict[str, float]) -> None:
    asyncio.run(abackdate_updates(store, ns, ago))


class _SleepAndSweep:
    """`time.sleep(s)` / `asyncio.sleep(s)` of the TTL tests: the clock moves `s` seconds
    and the stores of the test sweep (what their sweeper, every interval, would have done
    by then: the interval is half the TTL)."""

    def sleep(self, seconds: float) -> None:
        CLOCK.advance(seconds)
        for made in _made:
            made.sweep_ttl()

    async def asleep(self, seconds: float) -> None:
        CLOCK.advance(seconds)
        for made in _made:
            await made.asweep_ttl()


sleep_and_sweep = _SleepAndSweep()
