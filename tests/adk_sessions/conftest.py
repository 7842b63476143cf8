"""The vendored ADK session tests' one hook into the suite: the mindstore service of the
running test, on the suite's `store` fixture, for the database tests swapped onto it
(`test_session_service.get_session_service`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mindstore import Store
from mindstore.integrations.adk import MindstoreSessionService

from . import _conformance


@pytest.fixture(autouse=True)
def _mindstore_service_of_the_test(store: Store) -> Iterator[None]:
    _conformance._current.append(MindstoreSessionService(store.scoped(_conformance.TENANT)))
    try:
        yield
    finally:
        _conformance._current.pop()
