# Copyright (c) Microsoft Corporation. Licensed under the MIT License.
#
# Vendored for mindstore from github.com/microsoft/agent-framework, python/packages/core/
# tests/core/test_sessions.py, class TestInMemoryHistoryProvider (the history provider
# contract the framework checks its default provider against).
# What changed, and only this (test bodies are as upstream wrote them otherwise):
# * `InMemoryHistoryProvider(...)` names conftest.py's `provider(...)`: mindstore's
#   MindstoreHistoryProvider on the suite's store (the swap);
# * the in-memory provider keeps messages in the session state it is handed
#   (`state["messages"]`: its internals; mindstore keeps them in the task); the tests that
#   read that list read `await provider.get_messages("s1")` instead, the assertions as
#   upstream: test_save_messages_deduplicates_identical_messages,
#   test_save_messages_only_appends_new_messages,
#   test_save_messages_different_roles_same_text_not_deduplicated,
#   test_full_loop_does_not_grow_superlinearly, test_save_messages_preserves_duplicate_content,
#   test_save_messages_handles_replayed_transcript_with_duplicates;
# * the imports the tests make inside their bodies (`AgentResponse`) are made once at the
#   top; upstream's type-checker comments after `agent=None` are shortened;
# * left out: test_state_is_serializable, which checks that the in-memory provider's state
#   (`session.state[...]["messages"]`, Message objects) survives `AgentSession.to_dict()`:
#   a database provider keeps nothing in the session state.
# ruff: noqa

from typing import Any, cast

from agent_framework import AgentResponse, Message, SupportsAgentRun
from agent_framework._sessions import AgentSession, SessionContext

from .conftest import provider as InMemoryHistoryProvider


class TestInMemoryHistoryProvider:
    async def test_empty_state_returns_no_messages(self) -> None:
        provider = InMemoryHistoryProvider()
        session = AgentSession()
        ctx = SessionContext(session_id="s1", input_messages=[])
        await provider.before_run(  # type: ignore[arg-type]
            agent=None,  # type: ignore[arg-type]
            session=session,
            context=ctx,
            state=session.state.setdefault(provider.source_id, {}),
        )
        assert ctx.context_messages.get(provider.source_id, []) == []

    async def test_stores_and_loads_messages(self) -> None:
        provider = InMemoryHistoryProvider()
        session = AgentSession()

        # First run: send input, get response
        input_msg = Message(role="user", contents=["hello"])
        resp_msg = Message(role="assistant", contents=["hi there"])
        ctx1 = SessionContext(session_id="s1", input_messages=[input_msg])
        await provider.before_run(  # type: ignore[arg-type]
            agent=None,  # type: ignore[arg-type]
            session=session,
            context=ctx1,
            state=session.state.setdefault(provider.source_id, {}),
        )
        ctx1._response = AgentResponse(messages=[resp_msg])
        await provider.after_run(  # type: ignore[arg-type]
            agent=None,  # type: ignore[arg-type]
            session=session,
            context=ctx1,
            state=session.state.setdefault(provider.source_id, {}),
        )

        # Second run: should load previous messages
        ctx2 = SessionContext(session_id="s1", input_messages=[Message(role="user", contents=["again"])])
        await provider.before_run(  # type: ignore[arg-type]
            agent=None,  # type: ignore[arg-type]
            session=session,
            context=ctx2,
            state=session.state.setdefault(provider.source_id, {}),
        )
        loaded = ctx2.context_messages.get(provider.source_id, [])
        assert len(loaded) == 2
        assert loaded[0].text == "hello"
        assert loaded[1].text == "hi there"

    async def test_source_id_attribution(self) -> None:
        provider = InMemoryHistoryProvider("custom-source")
        assert provider.source_id == "custom-source"
        ctx = SessionContext(session_id="s1", input_messages=[])
        ctx.extend_messages("custom-source", [Message(role="user", contents=["test"])])
        assert "custom-source" in ctx.context_messages

    async def test_save_messages_deduplicates_identical_messages(self) -> None:
        """Test that save_messages does not re-append messages already in the store."""
        provider = InMemoryHistoryProvider()
        state: dict[str, Any] = {}

        msg1 = Message(role="user", contents=["hello"])
        msg2 = Message(role="assistant", contents=["hi there"])

        await provider.save_messages("s1", [msg1, msg2], state=state)
        assert len(await provider.get_messages("s1")) == 2

        await provider.save_messages("s1", [msg1, msg2], state=state)
        assert len(await provider.get_messages("s1")) == 2

    async def test_save_messages_only_appends_new_messages(self) -> None:
        """Test that save_messages filters out old messages and only appends new ones"""
        provider = InMemoryHistoryProvider()
        state: dict[str, Any] = {}

        msg1 = Message(role="user", contents=["hello"])
        msg2 = Message(role="assistant", contents=["hi there"])
        msg3 = Message(role="user", contents=["how are you?"])

        await provider.save_messages("s1", [msg1, msg2], state=state)
        assert len(await provider.get_messages("s1")) == 2

        await provider.save_messages("s1", [msg1, msg2, msg3], state=state)
        assert len(await provider.get_messages("s1")) == 3
        assert (await provider.get_messages("s1"))[2].text == "how are you?"

    async def test_save_messages_different_roles_same_text_not_deduplicated(self) -> None:
        """Test that messages with the same text but different roles are kept separate."""
        provider = InMemoryHistoryProvider()
        state: dict[str, Any] = {}

        msg1 = Message(role="user", contents=["ping"])
        msg2 = Message(role="assistant", contents=["ping"])

        await provider.save_messages("s1", [msg1, msg2], state=state)
        assert len(await provider.get_messages("s1")) == 2

    async def test_save_messages_deduplication_with_none_state(self) -> None:
        """Test that save_messages with None state does not raise."""
        provider = InMemoryHistoryProvider()
        msg = Message(role="user", contents=["hello"])
        await provider.save_messages("s1", [msg], state=None)

    async def test_full_loop_does_not_grow_superlinearly(self) -> None:
        """Regression test: a multi-round looped run must not re-persist the whole
        conversation on every round."""
        provider = InMemoryHistoryProvider()
        session = AgentSession()
        provider_state = session.state.setdefault(provider.source_id, {})
        ctx1 = SessionContext(session_id="s1", input_messages=[Message(role="user", contents=["turn 1"])])

        await provider.before_run(
            agent=cast("SupportsAgentRun", None),
            session=session,
            context=ctx1,
            state=provider_state,
        )
        ctx1._response = AgentResponse(messages=[Message(role="assistant", contents=["reply 1"])])
        await provider.after_run(
            agent=cast("SupportsAgentRun", None),
            session=session,
            context=ctx1,
            state=provider_state,
        )

        ctx2 = SessionContext(session_id="s1", input_messages=[Message(role="user", contents=["turn 2"])])
        await provider.before_run(
            agent=cast("SupportsAgentRun", None),
            session=session,
            context=ctx2,
            state=provider_state,
        )
        ctx2._response = AgentResponse(messages=[Message(role="assistant", contents=["reply 2"])])
        await provider.after_run(
            agent=cast("SupportsAgentRun", None),
            session=session,
            context=ctx2,
            state=provider_state,
        )

        stored = await provider.get_messages("s1")
        assert len(stored) == 4
        texts = [m.text for m in stored]
        assert texts == ["turn 1", "reply 1", "turn 2", "reply 2"]

    async def test_save_messages_preserves_duplicate_content(self) -> None:
        """Two separate user 'yes' replies in the same batch must both be persisted."""
        provider = InMemoryHistoryProvider()
        state: dict[str, Any] = {}

        yes_1 = Message(role="user", contents=["yes"])
        yes_2 = Message(role="user", contents=["yes"])

        await provider.save_messages("s1", [yes_1, yes_2], state=state)

        stored = await provider.get_messages("s1")
        assert len(stored) == 2
        assert stored[0].text == "yes"
        assert stored[1].text == "yes"

    async def test_save_messages_handles_replayed_transcript_with_duplicates(self) -> None:
        provider = InMemoryHistoryProvider()
        state: dict[str, Any] = {}

        msg_b = Message(role="user", contents=["B"])
        await provider.save_messages("s1", [msg_b], state=state)
        assert len(await provider.get_messages("s1")) == 1

        msg_a = Message(role="user", contents=["A"])
        msg_c = Message(role="user", contents=["C"])
        msg_b2 = Message(role="user", contents=["B"])
        msg_d = Message(role="user", contents=["D"])

        await provider.save_messages("s1", [msg_a, msg_b, msg_c, msg_b2, msg_d], state=state)

        stored = await provider.get_messages("s1")
        assert len(stored) == 4
        texts = [m.text for m in stored]
        assert texts == ["B", "C", "B", "D"]
