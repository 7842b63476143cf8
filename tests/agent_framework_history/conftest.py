"""The vendored Agent Framework history tests' one hook into the suite: `provider(...)`
makes a `MindstoreHistoryProvider` on the running test's `store` fixture (the swap), so
MINDSTORE_TEST_URI runs them on a server too."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from mindstore import Store
from mindstore.integrations.agent_framework import MindstoreHistoryProvider

TENANT = "acme"
_current: list[Store] = []


def provider(source_id: str | None = None, **flags: Any) -> MindstoreHistoryProvider:
    """What the vendored tests construct in place of the framework's providers."""
    return MindstoreHistoryProvider(_current[-1].scoped(TENANT), source_id=source_id, **flags)


@pytest.fixture(autouse=True)
def _store_of_the_test(store: Store) -> Iterator[None]:
    _current.append(store)
    try:
        yield
    finally:
        _current.pop()
