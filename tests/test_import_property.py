"""Property: whatever sessions a `SQLiteSession` file holds (any session ids the SDK
takes, any JSON items), importing them gives back through `MindstoreSession` exactly
what the SDK returns, and a second import writes nothing."""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path
from typing import Any
from uuid import uuid4

from agents.memory.sqlite_session import SQLiteSession
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mindstore
from mindstore.imports import import_from
from mindstore.integrations.openai_agents import MindstoreSession
from mindstore.store import Store

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
IDS = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=16)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | TEXT
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=6,
)  # fmt: skip
ITEMS = st.one_of(
    st.builds(lambda text: {"role": "user", "content": text}, TEXT),
    st.builds(lambda text: {"type": "message", "role": "assistant", "status": "completed",
                            "content": [{"type": "output_text", "text": text,
                                         "annotations": []}]}, TEXT),
    st.dictionaries(TEXT, JSON, max_size=3),  # an item of no known type: kept whole
)  # fmt: skip
SESSIONS = st.dictionaries(IDS, st.lists(ITEMS, min_size=1, max_size=4), min_size=1, max_size=3)
TEST_URI = os.environ.get("MINDSTORE_TEST_URI") or None


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions=SESSIONS)
def test_any_sessions_round_trip(sessions: dict[str, list[dict[str, Any]]]) -> None:
    async def body() -> None:
        store = await mindstore.connect(
            TEST_URI or "embedded", database=f"import_{uuid4().hex[:12]}"
        )
        try:
            await scenario(store)
        finally:
            if TEST_URI:
                await store.backend.client.drop_database(store.database.name)
            await store.close()

    async def scenario(store: Store) -> None:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "agents.db"
            expected = {}
            for session_id, items in sessions.items():
                session = SQLiteSession(session_id, str(path))
                await session.add_items(items)
                expected[session_id] = await session.get_items()
                session.close()
            tenant = "acme"
            receipt = await import_from(store, "openai-agents", path, tenant=tenant)
            view = store.scoped(tenant)
            got = {sid: await MindstoreSession(sid, view).get_items() for sid in sessions}
            assert got == expected
            assert receipt.read_sha256 == receipt.written_sha256
            again = await import_from(store, "openai-agents", path, tenant=tenant)
            assert again.written["messages"] == 0

    asyncio.run(body())
