"""The vendored LlamaIndex chat store tests' one hook into the suite: their `chat_store`
and `mongo_chat_store` fixtures give mindstore's stores on the suite's `store` fixture (the
swap), so MINDSTORE_TEST_URI runs them on a server too."""

from __future__ import annotations

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
