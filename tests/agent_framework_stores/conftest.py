"""The vendored Agent Framework session-store and checkpoint-storage tests' one hook into
the suite: `session_store()` and `checkpoint_storage(...)` make mindstore's on the running
test's `store` fixture (the swap), so MINDSTORE_TEST_URI runs them on a server too."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pytest

from mindstore import Store
from mindstore.integrations.agent_framework_checkpoints import MindstoreCheckpointStorage
from mindstore.integrations.agent_framework_sessions import MindstoreSessionStore

TENANT = "acme"
_current: list[Store] = []


def session_store() -> MindstoreSessionStore:
    """What the vendored tests construct in place of the framework's `SessionStore()`."""
    return MindstoreSessionStore(_current[-1].scoped(TENANT))


def checkpoint_storage(allowed: Iterable[str] = ()) -> MindstoreCheckpointStorage:
    """What the vendored tests construct in place of `InMemoryCheckpointStorage()`."""
    return MindstoreCheckpointStorage(_current[-1].scoped(TENANT), allowed_checkpoint_types=allowed)


@pytest.fixture(autouse=True)
def _store_of_the_test(store: Store) -> Iterator[None]:
    _current.append(store)
    try:
        yield
    finally:
        _current.pop()
