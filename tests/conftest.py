"""Shared fixtures: a fresh store per test, embedded by default or `MINDSTORE_TEST_URI`."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest

import mindstore
from index_table import audit as index_audit
from index_table import documented, row_key, shape_record
from mindstore.backends.recorder import observe_all
from mindstore.portable import MINDSTORE_COLLECTIONS, WRITE_COMMANDS, audit
from mindstore.registry import COLLECTIONS as REGISTERED
from mindstore.store import Store
from postgres_server import postgres_database, postgres_server  # noqa: F401 (fixtures)

TEST_URI = os.environ.get("MINDSTORE_TEST_URI") or None


@pytest.fixture
async def store() -> AsyncIterator[Store]:
    """A store on its own database, dropped afterwards on a real server."""
    database = f"mindstore_test_{uuid.uuid4().hex[:12]}"
    opened = await mindstore.connect(TEST_URI or "embedded", database=database)
    try:
        yield opened
    finally:
        if TEST_URI:
            await opened.backend.client.drop_database(database)
        await opened.close()


@pytest.fixture
def acme(store: Store) -> mindstore.TenantStore:
    return store.scoped("acme")


class StoreFactory:
    """More stores for one test, on the suite's backend (`MINDSTORE_TEST_URI` or embedded)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._opened: list[tuple[Store, str]] = []

    def sibling(self, store: Store | None = None, **options: Any) -> Store:
        """Another "process" on `store`'s database (default: the `store` fixture's): its own
        per-task locks and header cache, so its writers race the others' on the stored
        guards. `options` as for `Store` (page_policy, retry, header_cache_size, ...). It
        shares the backend: close only the store it came from."""
        return Store((store or self.store).backend, **options)

    async def fresh(self, **options: Any) -> Store:
        """A store on a database of its own (dropped afterwards on a server); `options` as
        for `mindstore.connect` (page_policy, offload_threshold, ...)."""
        database = f"mindstore_test_{uuid.uuid4().hex[:12]}"
        opened = await mindstore.connect(TEST_URI or "embedded", database=database, **options)
        self._opened.append((opened, database))
        return opened

    async def close(self) -> None:
        for opened, database in self._opened:
            if TEST_URI:
                await opened.backend.client.drop_database(database)
            await opened.close()


@pytest.fixture
async def stores(store: Store) -> AsyncIterator[StoreFactory]:
    """A `StoreFactory`: sibling stores on the `store` fixture's database, fresh ones."""
    factory = StoreFactory(store)
    try:
        yield factory
    finally:
        await factory.close()


@pytest.fixture
def store_factory(stores: StoreFactory) -> Callable[..., Awaitable[Store]]:
    """`stores.fresh`: a store on its own database (say, a fresh one to restore a backup
    into); `connect` keywords pass through."""
    return stores.fresh


async def open_store(**options: Any) -> Store:
    """A store on a database of its own on the suite's backend (`MINDSTORE_TEST_URI` or
    embedded), for tests that run their own loop (a hypothesis example, which cannot share
    a fixture's store); `options` as for `mindstore.connect`. Close it with `close_store`."""
    database = f"mindstore_test_{uuid.uuid4().hex[:12]}"
    return await mindstore.connect(TEST_URI or "embedded", database=database, **options)


async def close_store(opened: Store) -> None:
    """Close a store from `open_store`, dropping its database on a server."""
    if TEST_URI:
        await opened.backend.client.drop_database(opened.database.name)
    await opened.close()


TESTS_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


INDEXES = index_audit()
"""The index audit over the indexes mindstore declares (tests/index_table.py)."""
DOCUMENTED: set[tuple[str, str]] = set(documented())
"""The query shapes docs/operations.md lists ("Queries and their indexes")."""
SHAPES_FILE = os.environ.get("MINDSTORE_INDEX_SHAPES") or None
"""Where to append every query shape the suite sends (tests/index_table.py renders them);
while set, the table is not checked."""


@pytest.fixture(autouse=True)
def portable_audit(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail any test whose library commands leave the portable subset, miss the shard key,
    or make a query no declared index serves.

    Sees every command of every store and backend the test opens and audits those on
    mindstore's collections (rules: `mindstore.portable` and `mindstore.index_audit`; why:
    docs/operations.md). Commands a test sends itself (`store.database["tasks"].update_one(
    ...)` to arrange a state) are not mindstore's and are left out, by their `origin` in
    tests/. Every query shape an index serves must also be a row of docs/operations.md's
    table of query shapes (tests/index_table.py rewrites it); a bounded scan is documented by
    its family, below that table. A hypothesis test draws its calls anew each run, so its
    shapes are held to the index audit only (served by an index or a bounded scan).
    """
    with observe_all() as log:
        yield
    sent = [c for c in log if not (c.origin or "").startswith(TESTS_DIR)]
    # every collection mindstore writes is in the lifecycle registry (backup, erase, retention)
    unknown = {(c.collection, c.origin) for c in sent
               if c.name.lower() in WRITE_COMMANDS and c.collection not in REGISTERED}  # fmt: skip
    if unknown:
        shown = "\n".join(
            f"  {name} (written from {origin})" for name, origin in sorted(unknown, key=str)[:10]
        )
        pytest.fail(
            "mindstore wrote collections the registry (mindstore.registry) does not know:\n"
            + shown,
            pytrace=False,
        )
    found = [(c, v) for c in sent if c.collection in MINDSTORE_COLLECTIONS for v in audit([c])]
    if found:
        shown = "\n".join(f"  {v.command} on {v.collection}: {v.problem} (sent from {c.origin})"
                          for c, v in found[:10])  # fmt: skip
        pytest.fail(
            f"{len(found)} non-portable or shard-unsafe command(s):\n{shown}", pytrace=False
        )
    queries = INDEXES.findings(c for c in sent if c.collection in MINDSTORE_COLLECTIONS)
    unserved = [(c, f) for c, f in queries if not f.ok]
    if unserved:
        shown = "\n".join(
            f"  {c.name} on {f.shape.collection}: {f.shape.describe()} -> "
            f"{f.problem()} (sent from {c.origin})"
            for c, f in unserved[:10]
        )
        pytest.fail(f"{len(unserved)} query(ies) no declared index serves and no bounded scan "
                    f"allows (mindstore.index_audit):\n{shown}", pytrace=False)  # fmt: skip
    if SHAPES_FILE:  # recording the shapes to rewrite the table: not checking it
        with open(SHAPES_FILE, "a") as out:
            for record in {json.dumps(shape_record(f.shape)) for _, f in queries}:
                out.write(record + "\n")
        return
    if getattr(request.node.obj, "is_hypothesis_test", False):
        return  # drawn anew each run: the index audit above holds; the table lists the rest
    # a bounded scan is documented by its family (tests/test_index_audit.py checks that)
    missing = {row_key(f.shape): c.origin for c, f in queries
               if f.allowed is None and row_key(f.shape) not in DOCUMENTED}  # fmt: skip
    if missing:
        shown = "\n".join(f"  {coll}: {query} (sent from {origin})"
                          for (coll, query), origin in sorted(missing.items())[:10])  # fmt: skip
        pytest.fail(f"{len(missing)} query shape(s) missing from docs/operations.md's table "
                    f"(rewrite it with tests/index_table.py):\n{shown}", pytrace=False)  # fmt: skip
