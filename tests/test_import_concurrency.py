"""Imports of one source into one tenant, running at once in one process (real concurrent
coroutines on one store): each conversation is written by exactly one of them, nothing
doubles, and the written counts add up to the source's. Without the per-conversation
turn (`driver._one_at_a_time`) LlamaIndex chats doubled and ADK's session creation
raised `AlreadyExistsError` in the losers."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import test_import_adk as adk
import test_import_llamaindex as llamaindex
import test_import_openai_agents as openai_agents
from mindstore.imports import import_from
from mindstore.store import Store


async def three_at_once(store: Store, kind: str, source: Any) -> Counter[str]:
    receipts = await asyncio.gather(*[import_from(store, kind, source, tenant="acme")
                                      for _ in range(3)])  # fmt: skip
    total: Counter[str] = Counter()
    for receipt in receipts:
        total.update(receipt.written)
        assert receipt.verified == len(receipt.conversations)
    assert all(r.read == receipts[0].read for r in receipts)
    assert total == Counter(receipts[0].read)  # each conversation written once, in all
    return total


@pytest.mark.parametrize("kind", ["openai-agents", "llamaindex", "adk"])
async def test_three_imports_at_once_write_each_conversation_once(
    store: Store, tmp_path: Path, kind: str
) -> None:
    if kind == "openai-agents":
        expected = await openai_agents.build_source(tmp_path / "s.db")
        await three_at_once(store, kind, tmp_path / "s.db")
        assert await openai_agents.served(store, "acme") == expected
    elif kind == "llamaindex":
        expected = await llamaindex.build_source(tmp_path / "s.db")
        await three_at_once(store, kind, llamaindex.url(tmp_path / "s.db"))
        assert await llamaindex.served(store, "acme") == expected
    else:
        sessions = await adk.build_source(tmp_path / "s.db")
        await three_at_once(store, kind, adk.url(tmp_path / "s.db"))
        assert await adk.served(store, "acme") == {k: adk.as_read(v) for k, v in sessions.items()}
