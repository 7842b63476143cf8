"""Microsoft Agent Framework on mindstore: an `Agent` with tools runs on
`MindstoreHistoryProvider` exactly as on the framework's own `InMemoryHistoryProvider`
(same transcript), the stored session is a typed task (calls tracked, usage and model in
analytics), saves are exactly-once by message id and by the framework's replay rule, the
latest N come back in order, every `Message` comes back exactly, and bad input is refused
before anything is written. The framework's own history provider tests run in
tests/agent_framework_history."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

pytest.importorskip("agent_framework")

from agent_framework import (
    Agent,
    BaseChatClient,
    ChatResponse,
    Content,
    FunctionInvocationLayer,
    InMemoryHistoryProvider,
    Message,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mindstore.errors import ValidationError, WrongType
from mindstore.integrations import conversation_id_of, task_id_for
from mindstore.integrations.agent_framework import MindstoreHistoryProvider
from mindstore.integrations.agent_framework_messages import from_message, to_message
from mindstore.model.messages import AssistantMessage, ToolMessage, UserMessage
from mindstore.model.parts import ToolCallPart

KEYS = itertools.count()


class Scripted(FunctionInvocationLayer, BaseChatClient):
    """Stands in for a model: looks the question up, then answers; reports usage."""

    async def _answer(self, messages: list[Message]) -> ChatResponse:
        n = len(messages)
        if messages[-1].role == "user":
            call = Content.from_function_call(
                call_id=f"call-{n}", name="lookup", arguments={"topic": "refunds"}
            )
            return ChatResponse(messages=[Message(role="assistant", contents=[call],
                                                  message_id=f"r{n}")],
                                model="scripted-1",
                                usage_details={"input_token_count": 10 + n,
                                               "output_token_count": 3})  # fmt: skip
        return ChatResponse(messages=[Message(role="assistant", contents=["Refunds take 5 days."],
                                              message_id=f"r{n}")],
                            model="scripted-1",
                            usage_details={"input_token_count": 20 + n,
                                           "output_token_count": 5})  # fmt: skip

    def _inner_get_response(
        self, *, messages: Any, stream: bool, options: Any, **kwargs: Any
    ) -> Any:
        return self._answer(list(messages))


def lookup(topic: str) -> str:
    """Look a topic up in the manual."""
    return f"{topic}: 5 days"


def shape(message: Message) -> dict[str, Any]:
    """A message's dict without the random id the framework gives each call and result."""
    data = message.to_dict()
    for content in data["contents"]:
        if str(content.get("id", "")).startswith("af-call-"):
            content["id"] = "af-call"
    return data


async def agent_run(provider: Any, session_id: str) -> tuple[list[dict[str, Any]], list[int]]:
    agent = Agent(client=Scripted(), instructions="Answer from the manual.", tools=[lookup],
                  context_providers=[provider])  # fmt: skip
    session = agent.create_session(session_id=session_id)
    tokens = []
    for question in ("How long do refunds take?", "And for a gift card?"):
        response = await agent.run(question, session=session)
        tokens.append(response.usage_details["input_token_count"])
    state = session.state.setdefault(provider.source_id, {})
    return [shape(m) for m in await provider.get_messages(session_id, state=state)], tokens


async def test_an_agent_runs_on_the_provider_exactly_as_on_the_in_memory_one(store):
    acme = store.scoped("acme", owner="ann")
    ours, tokens = await agent_run(MindstoreHistoryProvider(acme), "org/team/chat-1")
    theirs, _ = await agent_run(InMemoryHistoryProvider(), "org/team/chat-1")
    assert ours == theirs and len(ours) == 8
    record = await acme.tasks.get(task_id_for("org/team/chat-1"))
    assert record.owner == "ann" and conversation_id_of(record) == "org/team/chat-1"
    assert record.open_tool_call_ids == [] and record.seq == 8
    stored = await acme.tasks.messages(record.id)
    assert [type(m) for m in stored] == [
        UserMessage,
        AssistantMessage,
        ToolMessage,
        AssistantMessage,
    ] * 2
    assert isinstance(stored[1].content[0], ToolCallPart)
    rows = {
        row.model: (row.tokens_in, row.tokens_out)
        for row in await acme.analytics.usage(group_by="model")
    }
    assert rows["scripted-1"] == (sum(tokens), 16)  # what the runs reported, per model
    assert await MindstoreHistoryProvider(acme).list_sessions() == ["org/team/chat-1"]


async def test_latest_n_come_back_in_order(store):
    provider = MindstoreHistoryProvider(store.scoped("acme"), max_messages=3)
    await provider.save_messages("s", [Message(role="user", contents=[f"m{i}"]) for i in range(7)])
    assert [m.text for m in await provider.get_messages("s")] == ["m4", "m5", "m6"]
    with pytest.raises(ValidationError, match="max_messages"):
        MindstoreHistoryProvider(store.scoped("acme"), max_messages=0)


def excluded_turns() -> list[Message]:
    """Two turns, the first answer marked excluded as Agent Framework's compaction marks it
    (`additional_properties["_excluded"]`), one message marked not excluded."""
    return [Message(role="user", contents=["u1"]),
            Message(role="assistant", contents=["a1"], additional_properties={"_excluded": True}),
            Message(role="user", contents=["u2"], additional_properties={"_excluded": False}),
            Message(role="assistant", contents=["a2"])]  # fmt: skip


@pytest.mark.filterwarnings("ignore:.*FileHistoryProvider is experimental")
@pytest.mark.parametrize("skip_excluded", [False, True])
async def test_skip_excluded_loads_what_the_frameworks_providers_load(
    store, tmp_path, skip_excluded
):
    """Issue 45: the framework's history providers (1.26) take `skip_excluded`;
    `MindstoreHistoryProvider` raised TypeError on it and loaded excluded messages."""
    from agent_framework import FileHistoryProvider

    ours = MindstoreHistoryProvider(store.scoped("acme"), skip_excluded=skip_excluded)
    memory = InMemoryHistoryProvider(skip_excluded=skip_excluded)
    files = FileHistoryProvider(tmp_path, skip_excluded=skip_excluded)
    state: dict[str, Any] = {}
    await ours.save_messages("s", excluded_turns())
    await memory.save_messages("s", excluded_turns(), state=state)
    await files.save_messages("s", excluded_turns())
    loaded = [[m.to_dict() for m in await ours.get_messages("s")],
              [m.to_dict() for m in await memory.get_messages("s", state=state)],
              [m.to_dict() for m in await files.get_messages("s")]]  # fmt: skip
    assert loaded[0] == loaded[1] == loaded[2]
    texts = [Message.from_dict(m).text for m in loaded[0]]
    assert texts == (["u1", "u2", "a2"] if skip_excluded else ["u1", "a1", "u2", "a2"])
    assert len(await store.scoped("acme").tasks.messages("s")) == 4  # kept in storage


async def test_skip_excluded_counts_the_latest_n_among_the_messages_given(store):
    acme = store.scoped("acme")
    turns = [*excluded_turns(),
             Message(role="user", contents=["u3"], additional_properties={"_excluded": 1}),
             Message(role="assistant", contents=["a3"],
                     additional_properties={"_excluded": True})]  # fmt: skip
    await MindstoreHistoryProvider(acme).save_messages("s", turns)
    latest = MindstoreHistoryProvider(acme, max_messages=2, skip_excluded=True)
    assert [m.text for m in await latest.get_messages("s")] == ["u2", "a2"]  # read further back
    whole = MindstoreHistoryProvider(acme, max_messages=9, skip_excluded=True)
    assert [m.text for m in await whole.get_messages("s")] == ["u1", "u2", "a2"]
    with pytest.raises(WrongType, match="skip_excluded"):
        MindstoreHistoryProvider(acme, skip_excluded="yes")


async def test_saves_are_exactly_once_by_message_id(store):
    acme = store.scoped("acme")
    provider = MindstoreHistoryProvider(acme)
    turn = [Message(role="user", contents=["hi"], message_id="u1"),
            Message(role="assistant", contents=["hello"], message_id="a1")]  # fmt: skip
    await provider.save_messages("s", turn)
    before = await acme.tasks.messages("s")
    await provider.save_messages("s", turn)  # a retried save
    await MindstoreHistoryProvider(acme).save_messages("s", turn[1:])  # another writer's replay
    assert await acme.tasks.messages("s") == before
    # two writers saving the same turn at once: each reads the tail before the other
    # writes, and the message ids make the second write a replay
    racing = [Message(role="user", contents=["race"], message_id="u2"),
              Message(role="assistant", contents=["won"], message_id="a2")]  # fmt: skip
    await asyncio.gather(
        *(MindstoreHistoryProvider(acme).save_messages("s", racing) for _ in range(3))
    )
    assert [m.text for m in await provider.get_messages("s")] == ["hi", "hello", "race", "won"]
    # the same message id with other content is another message, never dropped
    await provider.save_messages("s", [Message(role="user", contents=["bye"], message_id="u1")])
    assert [m.text for m in await provider.get_messages("s")] == [
        "hi",
        "hello",
        "race",
        "won",
        "bye",
    ]


@pytest.mark.parametrize(
    "flags", [{"store_inputs": False}, {"store_outputs": False}, {"load_messages": False}]
)
async def test_the_flags_choose_what_is_stored_as_for_the_in_memory_provider(store, flags):
    session_id = f"flags-{next(KEYS)}"
    ours, _ = await agent_run(MindstoreHistoryProvider(store.scoped("acme"), **flags), session_id)
    theirs, _ = await agent_run(InMemoryHistoryProvider(**flags), session_id)
    assert ours == theirs
    roles = [m["role"] for m in ours]
    assert "user" not in roles if flags.get("store_inputs") is False else roles.count("user") == 2
    assert "tool" not in roles if flags.get("store_outputs") is False else roles.count("tool") == 2


CONTENTS = st.one_of(
    st.builds(Content.from_text, st.text(max_size=8)),
    st.builds(lambda t: Content.from_text_reasoning(text=t), st.text(max_size=8)),
    st.builds(lambda c, a: Content.from_function_call(call_id=c, name="lookup", arguments=a),
              st.sampled_from(["c1", "c2", "bad id"]),
              st.one_of(st.dictionaries(st.sampled_from("ab"), st.integers(-9, 9)),
                        st.just('{"a": 1}'))),
    st.builds(lambda c, r: Content.from_function_result(call_id=c, result=r),
              st.sampled_from(["c1", "c2"]), st.text(max_size=5)),
    st.builds(lambda: Content.from_uri(uri="https://example.com/a.png", media_type="image/png")),
    st.builds(lambda n: Content.from_usage({"input_token_count": n}), st.integers(0, 9)),
)  # fmt: skip
MESSAGES = st.builds(
    lambda role, contents, mid, author: Message(role=role, contents=contents, message_id=mid,
                                                author_name=author),
    st.sampled_from(["user", "assistant", "system", "tool"]), st.lists(CONTENTS, max_size=3),
    st.one_of(st.none(), st.text(max_size=6)), st.one_of(st.none(), st.just("Agent")),
)  # fmt: skip


@settings(max_examples=80, deadline=None)
@given(st.lists(MESSAGES, max_size=4))
def test_every_message_comes_back_exactly(messages):
    calls: set[str] = set()
    for message in messages:
        assert to_message(from_message(message, calls=calls)).to_dict() == message.to_dict()


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(MESSAGES, min_size=1, max_size=4).filter(
        lambda ms: (
            len({m.message_id for m in ms if m.message_id is not None})
            == len([m for m in ms if m.message_id is not None])
        )
    )
)
async def test_through_the_store_too(store, messages):
    provider = MindstoreHistoryProvider(store.scoped("acme"))
    session_id = f"exact-{next(KEYS)}"
    await provider.save_messages(session_id, messages)
    assert [m.to_dict() for m in await provider.get_messages(session_id)] == [
        m.to_dict() for m in messages
    ]


async def stored_documents(store) -> list[Any]:
    return [[d async for d in store.database[name].find({})]
            for name in sorted(await store.database.list_collection_names())]  # fmt: skip


async def test_bad_input_is_refused_naming_the_argument_before_any_write(store):
    provider = MindstoreHistoryProvider(store.scoped("acme"))
    await provider.save_messages("s", [Message(role="user", contents=["keep me"])])
    before = await stored_documents(store)
    cases = [
        ("session_id", provider.save_messages("", [Message(role="user", contents=["x"])])),
        ("session_id", provider.get_messages("a\x00b")),
        ("session_id", provider.save_messages(7, [Message(role="user", contents=["x"])])),
        (
            r"messages\[1\]",
            provider.save_messages("s", [Message(role="user", contents=["x"]), "no"]),
        ),
        ("messages", provider.save_messages("s", "not a list")),
    ]
    for name, call in cases:
        with pytest.raises(ValidationError, match=name):
            await call
    assert await stored_documents(store) == before


async def test_sessions_are_the_views_own(store):
    ann, bob = store.scoped("acme", owner="ann"), store.scoped("acme", owner="bob")
    await MindstoreHistoryProvider(ann).save_messages(
        "alice@example.com:chat-1", [Message(role="user", contents=["hi"])]
    )
    assert await MindstoreHistoryProvider(bob).get_messages("alice@example.com:chat-1") == []
    assert await MindstoreHistoryProvider(bob).list_sessions() == []
    await MindstoreHistoryProvider(ann).clear("alice@example.com:chat-1")
    assert await MindstoreHistoryProvider(ann).list_sessions() == []
