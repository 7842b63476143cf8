# Copyright (c) Microsoft Corporation. Licensed under the MIT License.
#
# Vendored for mindstore from github.com/microsoft/agent-framework, commit
# 0772cd96178d05393b1a14923e471d1f7b9a2d7e, python/packages/azure-cosmos/tests/
# test_cosmos_history_provider.py (the tests of CosmosHistoryProvider, the framework's
# database-backed history provider).
# What changed, and only this:
# * test_cosmos_history_provider_roundtrip_with_emulator, the test that runs the provider
#   against a database, runs as upstream wrote it with the provider swapped: conftest.py's
#   `provider(...)` (mindstore on the suite's store) in place of a CosmosHistoryProvider on
#   a Cosmos client; its emulator settings, skip marks and database cleanup are removed;
# * the unit tests that drive a mocked Cosmos container check what the provider does
#   through the container's calls (`query_items` arguments, `execute_item_batch`
#   operations, partition keys: Cosmos's internals). Each is run here on the behaviour it
#   checks, through the provider's public interface, keeping its name and its data:
#   test_returns_deserialized_messages, test_empty_returns_empty,
#   test_none_session_id_uses_default_partition, test_skips_non_dict_message_payload
#   (mindstore stores typed messages: nothing to skip; what is read back is only
#   Messages), test_list_sessions_returns_unique_sorted_ids, test_saves_messages,
#   test_empty_messages_noop, test_batches_when_message_count_exceeds_limit (101
#   messages: mindstore writes them in one atomic write, all come back in order),
#   test_clear_deletes_all_session_items, test_before_run_loads_history,
#   test_after_run_stores_input_and_response;
# * left out, as they test the Cosmos client's set-up and lifetime (no mindstore
#   counterpart): TestCosmosHistoryProviderInit (4 tests), TestCosmosHistoryProviderContainerConfig
#   (1), TestCosmosHistoryProviderClose (4).
# ruff: noqa

from __future__ import annotations

import uuid

from agent_framework import AgentResponse, Message
from agent_framework._sessions import AgentSession, SessionContext

from .conftest import provider as CosmosHistoryProvider


class TestCosmosHistoryProviderGetMessages:
    async def test_returns_deserialized_messages(self) -> None:
        msg1 = Message(role="user", contents=["Hello"])
        msg2 = Message(role="assistant", contents=["Hi"])
        provider = CosmosHistoryProvider(source_id="mem")
        await provider.save_messages("s1", [msg1, msg2])

        messages = await provider.get_messages("s1")

        assert len(messages) == 2
        assert messages[0].role == "user"
        assert messages[0].text == "Hello"
        assert messages[1].role == "assistant"
        assert messages[1].text == "Hi"

    async def test_empty_returns_empty(self) -> None:
        provider = CosmosHistoryProvider(source_id="mem")
        messages = await provider.get_messages("s1")

        assert messages == []

    async def test_none_session_id_uses_default_partition(self) -> None:
        provider = CosmosHistoryProvider(source_id="mem")
        await provider.save_messages(None, [Message(role="user", contents=["Hello"])])

        assert [m.text for m in await provider.get_messages(None)] == ["Hello"]
        assert [m.text for m in await provider.get_messages("default")] == ["Hello"]

    async def test_skips_non_dict_message_payload(self) -> None:
        provider = CosmosHistoryProvider(source_id="mem")
        await provider.save_messages("s1", [Message(role="user", contents=["Hello"])])

        assert all(isinstance(m, Message) for m in await provider.get_messages("s1"))


class TestCosmosHistoryProviderListSessions:
    async def test_list_sessions_returns_unique_sorted_ids(self) -> None:
        provider = CosmosHistoryProvider(source_id="mem")
        for session_id in ["s2", "s1", "s1", "s3"]:
            await provider.save_messages(session_id, [Message(role="user", contents=[f"in {session_id}"])])

        sessions = await provider.list_sessions()

        assert sessions == ["s1", "s2", "s3"]


class TestCosmosHistoryProviderSaveMessages:
    async def test_saves_messages(self) -> None:
        provider = CosmosHistoryProvider(source_id="mem")
        messages = [Message(role="user", contents=["Hello"]), Message(role="assistant", contents=["Hi"])]

        await provider.save_messages("s1", messages)

        stored = await provider.get_messages("s1")
        assert len(stored) == 2
        assert stored[0].role == "user"

    async def test_empty_messages_noop(self) -> None:
        provider = CosmosHistoryProvider(source_id="mem")

        await provider.save_messages("s1", [])

        assert await provider.list_sessions() == []

    async def test_batches_when_message_count_exceeds_limit(self) -> None:
        provider = CosmosHistoryProvider(source_id="mem")
        messages = [Message(role="user", contents=[f"msg-{index}"]) for index in range(101)]

        await provider.save_messages("s1", messages)

        assert [m.text for m in await provider.get_messages("s1")] == [f"msg-{index}" for index in range(101)]


class TestCosmosHistoryProviderClear:
    async def test_clear_deletes_all_session_items(self) -> None:
        provider = CosmosHistoryProvider(source_id="mem")
        await provider.save_messages("s1", [Message(role="user", contents=["1"]), Message(role="user", contents=["2"])])

        await provider.clear("s1")

        assert await provider.get_messages("s1") == []


class TestCosmosHistoryProviderBeforeAfterRun:
    async def test_before_run_loads_history(self) -> None:
        msg = Message(role="user", contents=["old msg"])
        provider = CosmosHistoryProvider(source_id="mem")
        await provider.save_messages("s1", [msg])
        session = AgentSession(session_id="test")
        context = SessionContext(input_messages=[Message(role="user", contents=["new msg"])], session_id="s1")

        await provider.before_run(
            agent=None, session=session, context=context, state=session.state.setdefault(provider.source_id, {})
        )  # type: ignore[arg-type]

        assert "mem" in context.context_messages
        assert context.context_messages["mem"][0].text == "old msg"

    async def test_after_run_stores_input_and_response(self) -> None:
        provider = CosmosHistoryProvider(source_id="mem")
        session = AgentSession(session_id="test")
        context = SessionContext(input_messages=[Message(role="user", contents=["hi"])], session_id="s1")
        context._response = AgentResponse(messages=[Message(role="assistant", contents=["hello"])])

        await provider.after_run(
            agent=None, session=session, context=context, state=session.state.setdefault(provider.source_id, {})
        )  # type: ignore[arg-type]

        stored = await provider.get_messages("s1")
        assert len(stored) == 2
        assert stored[0].role == "user"
        assert stored[0].contents[0].text == "hi"
        assert stored[1].role == "assistant"
        assert stored[1].contents[0].text == "hello"


async def test_cosmos_history_provider_roundtrip_with_emulator() -> None:
    unique = uuid.uuid4().hex[:8]
    session_id = f"session-{unique}"

    provider = CosmosHistoryProvider(source_id="cosmos_integration")

    await provider.save_messages(
        session_id,
        [
            Message(role="user", contents=["Hello Cosmos"]),
            Message(role="assistant", contents=["Hi from Cosmos"]),
        ],
    )

    stored_messages = await provider.get_messages(session_id)
    assert [message.role for message in stored_messages] == ["user", "assistant"]
    assert [message.text for message in stored_messages] == ["Hello Cosmos", "Hi from Cosmos"]

    sessions = await provider.list_sessions()
    assert session_id in sessions

    await provider.clear(session_id)
    assert await provider.get_messages(session_id) == []
