"""Shared fixtures: a fresh store per test, embedded by default or `MINDSTORE_TEST_URI`."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

import mindstore
from mindstore.backends.recorder import observe_all
from mindstore.portable import MINDSTORE_COLLECTIONS, audit
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
def acme(store: Store) -> mindstore.TenantStore:
    return store.scoped("acme")


@pytest.fixture(autouse=True)
def portable_audit(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail any test whose commands leave the portable subset or miss the shard key.

    Sees every command of every store and backend the test opens, and audits those on
    mindstore's collections (see `mindstore.portable` for the rules and
    `docs/operations.md` for why).
    """
    with observe_all() as log:
        yield
    violations = audit(log, collections=MINDSTORE_COLLECTIONS)
    if violations:
        shown = "\n".join(f"  {v.command} on {v.collection}: {v.problem}" for v in violations[:10])
        pytest.fail(f"{len(violations)} non-portable or shard-unsafe command(s):\n{shown}", pytrace=False)
