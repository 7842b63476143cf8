"""The vendored `EncryptedSession` tests' one hook into the suite: `SQLiteSession(...)` in
them names `MindstoreSession`, a `MindstoreSession` on the running test's `store` fixture
(the swap), so MINDSTORE_TEST_URI runs them on a server too."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")
pytest.importorskip("cryptography")

from mindstore import Store
from mindstore.integrations.openai_agents import MindstoreSession as Session

TENANT = "acme"
_current: list[Store] = []


class MindstoreSession(Session):
    """What the vendored tests construct in place of `SQLiteSession(session_id, db_path)`:
    the database file names nothing here (every session lives in the test's store), and
    `close()` has nothing to close."""

    def __init__(self, session_id: str, db_path: str | Path = ":memory:", **options: Any) -> None:
        super().__init__(session_id, _current[-1].scoped(TENANT), **options)

    def close(self) -> None:
        """Nothing to close: the store outlives the session."""


@pytest.fixture(autouse=True)
def _store_of_the_test(store: Store) -> Iterator[None]:
    _current.append(store)
    try:
        yield
    finally:
        _current.pop()
