"""Shared fixtures: a fresh store per test, embedded by default or `MINDSTORE_TEST_URI`."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator

import pytest

import mindstore
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
