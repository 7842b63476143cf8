# Copyright (c) Microsoft Corporation. Licensed under the MIT License.
#
# Vendored for mindstore from github.com/microsoft/agent-framework, commit
# 5eb3eb745e16324ac7bffb1dbe006d8f13c8d993, python/packages/core/tests/core/
# test_sessions.py (TestSessionStore, the in-memory SessionStore's tests, and the
# FileSessionStore tests of behaviour a durable store shares).
# What changed, and only this:
# * `SessionStore()` and `FileSessionStore(tmp_path)` are conftest.py's `session_store()`
#   (mindstore on the suite's store); test_round_trips_session_across_store_instances
#   drops its last four lines, which list and read the file store's files;
# * left out, as they read the framework's internals or the file store's files:
#   test_is_marked_experimental (the class's feature-stage attributes),
#   test_operations_mark_feature_usage (2 tests x 3: patch the framework's telemetry),
#   test_round_trips_binary_messagepack_session, test_set_replaces_atomically_without_
#   leaving_temp_files and the corrupt/quarantine/snapshot-version tests (files);
# * left out as mindstore differs on purpose: test_rejects_custom_agent_session_subclass
#   (a subclass's `to_dict` is stored; it comes back as an AgentSession),
#   test_unsupported_state_object_is_rejected_for_durable_storage (refused too, with
#   mindstore's ValidationError, a ValueError naming `session`, not TypeError),
#   test_non_finite_state_is_rejected_for_durable_storage (kept, as the in-memory store
#   keeps them), test_unregistered_pydantic_state_warns_for_durable_serialization (the
#   framework's `to_dict` warns as upstream expects; not re-checked here).
# ruff: noqa

from __future__ import annotations

from typing import Any

import pytest

from agent_framework import AgentSession, Message, register_state_type

from .conftest import session_store as _store


def SessionStore():
    return _store()


def FileSessionStore(_path: Any):
    return _store()


class _RegisteredSessionState:
    def __init__(self, value: str) -> None:
        self.value = value

    @classmethod
    def _get_type_identifier(cls) -> str:
        return "registered_session_state"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self._get_type_identifier(), "value": self.value}

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> "_RegisteredSessionState":
        return cls(value=str(value["value"]))


register_state_type(_RegisteredSessionState)


class TestSessionStore:
    async def test_get_returns_none_for_missing_id(self) -> None:
        store = SessionStore()

        assert await store.get("session-1") is None

    async def test_set_then_get_returns_independent_copy(self) -> None:
        store = SessionStore()
        session = AgentSession(session_id="session-1")
        session.state["nested"] = {"values": ["original"]}

        await store.set("session-1", session)

        stored = await store.get("session-1")
        assert stored is not None
        assert stored is not session
        stored.state["nested"]["values"].append("changed")

        reread = await store.get("session-1")
        assert reread is not None
        assert reread.state["nested"]["values"] == ["original"]

    async def test_set_stores_independent_snapshot(self) -> None:
        store = SessionStore()
        session = AgentSession(session_id="session-1")
        session.state["nested"] = {"values": ["original"]}

        await store.set("session-1", session)
        session.state["nested"]["values"].append("changed")

        stored = await store.get("session-1")
        assert stored is not None
        assert stored.state["nested"]["values"] == ["original"]

    async def test_set_replaces_existing_entry(self) -> None:
        store = SessionStore()
        await store.set("session-1", AgentSession(session_id="first"))
        await store.set("session-1", AgentSession(session_id="second"))

        stored = await store.get("session-1")

        assert stored is not None
        assert stored.session_id == "second"

    async def test_delete_forgets_session(self) -> None:
        store = SessionStore()
        await store.set("session-1", AgentSession(session_id="session-1"))

        await store.delete("session-1")

        assert await store.get("session-1") is None

    @pytest.mark.parametrize("session_id", ["two words", "tenant/user", "session.id", "café"])
    async def test_accepts_opaque_non_empty_session_id(self, session_id: str) -> None:
        store = SessionStore()
        session = AgentSession()

        await store.set(session_id, session)
        assert await store.get(session_id) is not None
        await store.delete(session_id)
        assert await store.get(session_id) is None

    async def test_empty_session_id_raises(self) -> None:
        store = SessionStore()
        session = AgentSession()

        with pytest.raises(ValueError, match="session_id"):
            await store.get("")
        with pytest.raises(ValueError, match="session_id"):
            await store.set("", session)
        with pytest.raises(ValueError, match="session_id"):
            await store.delete("")



class TestFileSessionStore:
    async def test_round_trips_session_across_store_instances(self, tmp_path: Any) -> None:
        session = AgentSession(session_id="framework-session", service_session_id={"response_id": "resp-1"})
        session.state["nested"] = {
            "messages": [Message(role="user", contents=["hello"])],
            "custom": [_RegisteredSessionState("persisted")],
        }

        await FileSessionStore(tmp_path).set("tenant_user-conversation", session)
        restored = await FileSessionStore(tmp_path).get("tenant_user-conversation")

        assert restored is not None
        assert restored is not session
        assert restored.session_id == "framework-session"
        assert restored.service_session_id == {"response_id": "resp-1"}
        assert isinstance(restored.state["nested"]["messages"][0], Message)
        assert restored.state["nested"]["messages"][0].text == "hello"
        assert isinstance(restored.state["nested"]["custom"][0], _RegisteredSessionState)
        assert restored.state["nested"]["custom"][0].value == "persisted"

    async def test_unregistered_to_dict_state_preserves_legacy_durable_serialization(self, tmp_path: Any) -> None:
        class UnregisteredState:
            def to_dict(self) -> dict[str, Any]:
                return {"type": "unregistered_state", "value": "legacy"}

        session = AgentSession(session_id="unregistered")
        session.state["nested"] = [{"value": UnregisteredState()}]

        store = FileSessionStore(tmp_path)
        await store.set("unregistered", session)
        restored = await store.get("unregistered")

        assert restored is not None
        assert restored.state["nested"] == [{"value": {"type": "unregistered_state", "value": "legacy"}}]

    async def test_missing_and_deleted_sessions_return_none(self, tmp_path: Any) -> None:
        store = FileSessionStore(tmp_path)
        assert await store.get("session-1") is None

        await store.set("session-1", AgentSession(session_id="session-1"))
        await store.delete("session-1")

        assert await store.get("session-1") is None

