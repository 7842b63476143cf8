"""The vendored LlamaIndex chat store tests' one hook into the suite: their `chat_store`
and `mongo_chat_store` fixtures give mindstore's stores on the suite's `store` fixture (the
swap), so MINDSTORE_TEST_URI runs them on a server too."""

from __future__ import annotations

import inspect
import os

import pytest

from mindstore import Store
from mindstore.integrations.llamaindex import MindstoreChatStore, MindstoreLegacyChatStore

TENANT = "acme"


@pytest.fixture()
def chat_store(store: Store) -> MindstoreChatStore:
    return MindstoreChatStore(store.scoped(TENANT))


@pytest.fixture()
def mongo_chat_store(store: Store) -> MindstoreLegacyChatStore:
    return MindstoreLegacyChatStore(store.scoped(TENANT))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """On a server (MINDSTORE_TEST_URI), the sync tests are skipped: the store's client is
    bound to the loop the suite opened it on, and a sync call with no loop running runs in
    a new one (docs/integrations.md, "Sync methods and threads": run the store's loop in a
    thread of its own). On the embedded backend they run."""
    if not os.environ.get("MINDSTORE_TEST_URI"):
        return
    for item in items:
        function = getattr(item, "function", None)
        if (
            "llamaindex_chat_stores" in str(item.fspath)
            and function is not None
            and not inspect.iscoroutinefunction(function)
            and "mongo_chat_store" in getattr(item, "fixturenames", ())
        ):
            item.add_marker(
                pytest.mark.skip(reason="sync methods on a server: see this hook's doc")
            )
