"""Shared fixtures: a fresh store per test, embedded by default or `MINDSTORE_TEST_URI`."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest

import mindstore
from mindstore.backends.recorder import observe_all
from mindstore.portable import MINDSTORE_COLLECTIONS, WRITE_COMMANDS, audit
from mindstore.registry import COLLECTIONS as REGISTERED
from mindstore.store import Store

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
async def store_factory() -> AsyncIterator[Callable[..., Awaitable[Store]]]:
    """More stores, each on its own database (say, a fresh one to restore a backup into);
    `connect` keywords pass through. Dropped and closed afterwards, like `store`."""
    opened: list[tuple[Store, str]] = []

    async def make(**kwargs: Any) -> Store:
        database = f"mindstore_test_{uuid.uuid4().hex[:12]}"
        made = await mindstore.connect(TEST_URI or "embedded", database=database, **kwargs)
        opened.append((made, database))
        return made

    try:
        yield make
    finally:
        for made, database in opened:
            if TEST_URI:
                await made.backend.client.drop_database(database)
            await made.close()


@pytest.fixture
def acme(store: Store) -> mindstore.TenantStore:
    return store.scoped("acme")


TESTS_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


@pytest.fixture(autouse=True)
def portable_audit() -> Iterator[None]:
    """Fail any test whose library commands leave the portable subset or miss the shard key.

    Sees every command of every store and backend the test opens and audits those on
    mindstore's collections (rules: `mindstore.portable`; why: docs/operations.md).
    Commands a test sends itself (`store.database["tasks"].update_one(...)` to arrange a
    state) are not mindstore's and are left out, by their `origin` in tests/.
    """
    with observe_all() as log:
        yield
    sent = [c for c in log if not (c.origin or "").startswith(TESTS_DIR)]
    # every collection mindstore writes is in the lifecycle registry (backup, erase, retention)
    unknown = {(c.collection, c.origin) for c in sent
               if c.name.lower() in WRITE_COMMANDS and c.collection not in REGISTERED}  # fmt: skip
    if unknown:
        shown = "\n".join(f"  {name} (written from {origin})" for name, origin in sorted(unknown, key=str)[:10])
        pytest.fail(f"mindstore wrote collections the registry (mindstore.registry) does not know:\n{shown}",
                    pytrace=False)
    found = [(c, v) for c in sent if c.collection in MINDSTORE_COLLECTIONS for v in audit([c])]
    if found:
        shown = "\n".join(f"  {v.command} on {v.collection}: {v.problem} (sent from {c.origin})"
                          for c, v in found[:10])  # fmt: skip
        pytest.fail(f"{len(found)} non-portable or shard-unsafe command(s):\n{shown}", pytrace=False)
