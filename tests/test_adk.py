"""mindstore.integrations.adk: ADK's Runner on it side by side with ADK's in-memory service,
events as typed messages, exact round trips, range reads, stale and concurrent appends,
hostile ids. ADK's own session-service tests run in tests/adk_sessions."""

from __future__ import annotations

import asyncio
import builtins
import inspect
import json
import re
import uuid
from collections.abc import AsyncGenerator
from typing import Any

import google.adk.sessions
import hypothesis
import pytest
from google.adk.agents.llm_agent import LlmAgent
from google.adk.errors import StaleSessionError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import BaseSessionService, GetSessionConfig
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.adk.sessions.session import Session
from google.adk.tools.tool_context import ToolContext
from google.genai import types
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

import mindstore
import mindstore.errors
from conftest import TEST_URI, StoreFactory
from mindstore.backup import backup, restore
from mindstore.backup.erase import erase
from mindstore.errors import ValidationError
from mindstore.integrations.adk import MindstoreSessionService
from mindstore.integrations.adk_events import (
    message_for,
    owner_of,
    register_task_id,
    session_task_id,
    slot_id,
)
from mindstore.model.messages import AssistantMessage, ToolMessage, UserMessage
from mindstore.model.parts import ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from mindstore.store import Store
from test_api_docstrings import _methods, _section
from test_integrations_docs import example

APP = "trips"

# -- a scripted model: ADK's Runner without a network ------------------------------------


class ScriptedModel(BaseLlm):
    """Answers each model call with the next scripted content (one per call, in order)."""

    script: list[types.Content]

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        yield LlmResponse(
            content=self.script.pop(0),
            usage_metadata=types.GenerateContentResponseUsageMetadata(
                prompt_token_count=10, candidates_token_count=5, total_token_count=15
            ),
            model_version="scripted-1",
        )


def remember(city: str, tool_context: ToolContext) -> dict[str, Any]:
    """Remembers the user's city (user state), counts calls (app state)."""
    tool_context.state["user:city"] = city
    tool_context.state["app:calls"] = tool_context.state.get("app:calls", 0) + 1
    tool_context.state["last_tool"] = "remember"
    tool_context.state["temp:scratch"] = "never stored"
    return {"ok": True}


def recall(tool_context: ToolContext) -> dict[str, Any]:
    """The city remembered in another session of the user."""
    tool_context.state["last_tool"] = "recall"
    return {"city": tool_context.state.get("user:city")}


def call(name: str, args: dict[str, Any]) -> types.Content:
    return types.Content(
        role="model", parts=[types.Part(function_call=types.FunctionCall(name=name, args=args))]
    )


def text(words: str, thought: str | None = None) -> types.Content:
    parts = [types.Part(text=thought, thought=True)] if thought else []
    return types.Content(role="model", parts=[*parts, types.Part(text=words)])


SCRIPT = [  # session one: remember; session two: recall
    call("remember", {"city": "Lisbon"}),
    text("Noted: Lisbon.", thought="the user lives in Lisbon"),
    call("recall", {}),
    text("You live in Lisbon."),
]


async def drive(service: BaseSessionService) -> list[str]:
    """Two sessions of one user through a Runner; the session ids."""
    agent = LlmAgent(
        name="planner", model=ScriptedModel(model="scripted", script=list(SCRIPT)),
        tools=[remember, recall], instruction="help",
    )  # fmt: skip
    runner = Runner(agent=agent, app_name=APP, session_service=service)
    ids = []
    for words in ("I live in Lisbon", "Where do I live?"):
        session = await service.create_session(app_name=APP, user_id="alice")
        message = types.Content(role="user", parts=[types.Part(text=words)])
        async for _event in runner.run_async(
            user_id="alice", session_id=session.id, new_message=message
        ):
            pass
        ids.append(session.id)
    return ids


def shape(event: Event) -> dict[str, Any]:
    """An event without what each run draws afresh (ids, times, invocation, call ids)."""
    dumped = json.loads(event.model_dump_json(exclude_none=True))
    for key in ("id", "timestamp", "invocation_id"):
        dumped.pop(key, None)
    text_form = json.dumps(dumped, sort_keys=True)
    for call_id in sorted({p["function_call"]["id"] for p in _parts(dumped, "function_call")}
                          | {p["function_response"]["id"]
                             for p in _parts(dumped, "function_response")}):  # fmt: skip
        text_form = text_form.replace(call_id, "<call>")
    return json.loads(text_form)  # type: ignore[no-any-return]


def _parts(dumped: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [p for p in (dumped.get("content") or {}).get("parts", []) if p.get(kind)]


async def test_a_runner_gives_the_same_events_and_state_as_on_adks_in_memory_service(
    store: Store,
) -> None:
    reference = InMemorySessionService()
    service = MindstoreSessionService(store.scoped("acme"))
    for left, right in zip(await drive(reference), await drive(service), strict=True):
        expected = await reference.get_session(app_name=APP, user_id="alice", session_id=left)
        got = await service.get_session(app_name=APP, user_id="alice", session_id=right)
        assert expected is not None and got is not None
        assert [shape(e) for e in got.events] == [shape(e) for e in expected.events]
        assert got.state == expected.state
        assert len(got.events) == 4  # user, call, response, text; state moved with them
    assert got.state["user:city"] == "Lisbon" and got.state["app:calls"] == 1
    assert "temp:scratch" not in got.state
    response = next(e for e in got.events if e.get_function_responses())
    assert response.get_function_responses()[0].response == {"city": "Lisbon"}
    listed = await service.list_sessions(app_name=APP, user_id="alice")
    assert [s.state for s in listed.sessions] == [
        s.state for s in (await reference.list_sessions(app_name=APP, user_id="alice")).sessions
    ]


async def test_events_are_typed_messages_that_analytics_and_tasks_read(store: Store) -> None:
    acme = store.scoped("acme")
    service = MindstoreSessionService(acme)
    (first, _second) = await drive(service)
    messages = await acme.tasks.messages(session_task_id(APP, "alice", first))
    kinds = [type(m) for m in messages[1:]]
    assert kinds == [UserMessage, AssistantMessage, ToolMessage, AssistantMessage]
    user, asked, answered, said = messages[1:]
    assert isinstance(user.content[0], TextPart) and user.content[0].text == "I live in Lisbon"
    (tool_call,) = asked.content
    assert isinstance(tool_call, ToolCallPart) and tool_call.tool_name == "remember"
    header = await acme.tasks.header(session_task_id(APP, "alice", first))
    assert header.open_tool_calls == []  # tracked: opened by the call, closed by its answer
    (result,) = answered.content
    assert isinstance(result, ToolResultPart) and result.tool_call_id == tool_call.tool_call_id
    assert [type(p) for p in said.content] == [ReasoningPart, TextPart]
    assert isinstance(said, AssistantMessage) and said.model_id == "scripted-1"
    record = await acme.tasks.get(session_task_id(APP, "alice", first))
    assert record.owner == "alice"
    rows = await acme.analytics.usage(group_by="model")
    (row,) = [r for r in rows if r.model == "scripted-1"]
    assert (row.tokens_in, row.tokens_out) == (40, 20)  # four model calls, two sessions
    # formats read the session: the Gemini export gives the conversation back
    contents = mindstore.formats.to_gemini(messages)["contents"]
    assert contents[0]["parts"] == [{"text": "I live in Lisbon"}]


async def test_a_redacted_event_comes_back_redacted(store: Store) -> None:
    acme = store.scoped("acme")
    service = MindstoreSessionService(acme)
    session = await service.create_session(app_name=APP, user_id="bob")
    task_id = session_task_id(APP, "bob", session.id)
    events = [
        Event(author="user", content=types.Content(role="user", parts=[
            types.Part(text=f"my card is 411{i}")]), actions=EventActions(state_delta={"n": i}))
        for i in range(3)
    ]  # fmt: skip
    for event in events:
        await service.append_event(session, event)
    # one part: the event keeps its own fields, its text is gone
    await acme.tasks.redact(task_id, slot_id(task_id, 1), reason="pci", part_index=0)
    # the whole message: its metadata goes too, so the event keeps only its id and time,
    # and its state change goes with it
    await acme.tasks.redact(task_id, slot_id(task_id, 3), reason="pci")
    got = await service.get_session(app_name=APP, user_id="bob", session_id=session.id)
    assert got is not None
    assert "4110" not in got.events[0].model_dump_json()
    assert got.events[0].id == events[0].id and got.events[0].author == "user"
    assert got.events[1] == events[1]
    assert "4112" not in got.events[2].model_dump_json()
    assert got.events[2].id == slot_id(task_id, 3) and got.state == {"n": 1}
    await service.append_event(got, events[0].model_copy(update={"id": "next"}))  # still writes


async def test_erasing_a_user_erases_their_sessions_and_user_state(store: Store) -> None:
    service = MindstoreSessionService(store.scoped("acme"))
    mine = await service.create_session(app_name=APP, user_id="carol", state={"user:k": 1})
    other = await service.create_session(app_name=APP, user_id="dave", state={"app:k": 2})
    await erase(store, "acme", owner=owner_of("carol"))
    assert await service.get_session(app_name=APP, user_id="carol", session_id=mine.id) is None
    assert await service.get_user_state(app_name=APP, user_id="carol") == {}
    kept = await service.get_session(app_name=APP, user_id="dave", session_id=other.id)
    assert kept is not None and kept.state == {"app:k": 2}  # app state is the tenant's


async def test_a_backup_restores_sessions_and_shared_state(
    store: Store, store_factory: Any, tmp_path: Any
) -> None:
    service = MindstoreSessionService(store.scoped("acme"))
    (first, second) = await drive(service)
    await backup(store, tmp_path / "adk")
    target = await store_factory()
    await restore(target, tmp_path / "adk")
    restored = MindstoreSessionService(target.scoped("acme"))
    for session_id in (first, second):
        assert await restored.get_session(
            app_name=APP, user_id="alice", session_id=session_id
        ) == await service.get_session(app_name=APP, user_id="alice", session_id=session_id)
    assert await restored.get_user_state(app_name=APP, user_id="alice") == {"city": "Lisbon"}


# -- exact round trips -------------------------------------------------------------------

NAMES = st.text(st.characters(codec="utf-8", exclude_categories=("Cc", "Cs")), max_size=12)
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | NAMES
    | st.floats(allow_nan=False, allow_infinity=False),  # ADK state is JSON
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NAMES, inner, max_size=3),
    max_leaves=8,
)  # fmt: skip
CALL_IDS = st.text("abcdef0123456789-", min_size=1, max_size=12).map(lambda s: "adk-" + s)
PART = st.one_of(
    NAMES.map(lambda t: types.Part(text=t)),
    NAMES.map(lambda t: types.Part(text=t, thought=True)),
    st.binary(max_size=24).map(lambda b: types.Part.from_bytes(data=b, mime_type="image/png")),
    st.builds(
        lambda i, n, a: types.Part(function_call=types.FunctionCall(id=i, name=n, args=a)),
        CALL_IDS, NAMES.filter(bool), st.dictionaries(NAMES, JSONISH, max_size=3),
    ),
    st.builds(
        lambda i, n, r: types.Part(function_response=types.FunctionResponse(id=i, name=n,
                                                                            response=r)),
        st.none() | CALL_IDS, NAMES.filter(bool), st.dictionaries(NAMES, JSONISH, max_size=3),
    ),
)  # fmt: skip
EVENT = st.builds(
    lambda author, role, parts, delta, usage, when, model: Event(
        author=author, invocation_id="inv",
        content=None if parts is None else types.Content(role=role, parts=parts),
        actions=EventActions(state_delta=delta), timestamp=when, model_version=model,
        usage_metadata=None if usage is None else types.GenerateContentResponseUsageMetadata(
            prompt_token_count=usage, candidates_token_count=usage + 1),
    ),
    st.sampled_from(["user", "agent"]), st.sampled_from(["user", "model", None]),
    st.none() | st.lists(PART, max_size=4), st.dictionaries(NAMES, JSONISH, max_size=3),
    st.none() | st.integers(0, 10**6), st.floats(0, 4e9, allow_nan=False),
    st.none() | NAMES,
)  # fmt: skip


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=st.lists(EVENT, min_size=1, max_size=4))
def test_get_session_returns_the_events_appended_exactly(events: list[Event]) -> None:
    async def scenario() -> None:
        store = await mindstore.connect(
            TEST_URI or "embedded", database=f"mindstore_test_{uuid.uuid4().hex[:12]}"
        )
        try:
            service = MindstoreSessionService(store.scoped("acme"))
            session = await service.create_session(app_name=APP, user_id="u")
            for event in events:
                await service.append_event(session, event)
            got = await service.get_session(app_name=APP, user_id="u", session_id=session.id)
            assert got == session  # events, state and last update time, exactly
            tail = await service.get_session(
                app_name=APP, user_id="u", session_id=session.id,
                config=GetSessionConfig(num_recent_events=2),
            )  # fmt: skip
            assert tail is not None and tail.events == session.events[-2:]
        finally:
            if TEST_URI:
                await store.backend.client.drop_database(store.database.name)
            await store.close()

    asyncio.run(scenario())


# -- state no stored state can hold -------------------------------------------------------

NOT_UTF8 = b"\xff\xfe not text"


class Blob(BaseModel):
    """A model with a `bytes` field, as a tool might put in state."""

    raw: bytes


def adk_state_json(state: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON the installed ADK makes of a session state (its own serializer, the one
    its database services follow), None when it refuses the state: bytes that are not
    UTF-8 text are refused up to 2.13 and base64 text from 2.14."""
    try:
        dumped = Session(id="s", app_name=APP, user_id="u", state=state).model_dump(mode="json")
    except ValueError:
        return None
    return dict(dumped["state"])


ADK_REFUSES_BINARY = adk_state_json({"k": NOT_UTF8}) is None
binary_refused = pytest.mark.skipif(
    not ADK_REFUSES_BINARY,
    reason="this google-adk stores bytes that are not UTF-8 text (as base64 text): "
    "test_bytes_in_state_are_stored_as_adks_sqlite_service_stores_them holds that",
)
REFUSED = [  # a state (or delta) part, and where the error names the value
    pytest.param({"k": NOT_UTF8}, "['k']", id="session", marks=binary_refused),
    pytest.param({"app:k": NOT_UTF8}, "['app:k']", id="app", marks=binary_refused),
    pytest.param({"user:k": bytearray(NOT_UTF8)}, "['user:k']", id="user", marks=binary_refused),
    pytest.param(
        {"k": {"deep": [1, NOT_UTF8]}}, "['k']['deep'][1]", id="nested", marks=binary_refused
    ),
    pytest.param(
        {"user:k": {NOT_UTF8: 1}}, "['user:k'] (the key", id="nested-key", marks=binary_refused
    ),
    pytest.param({"app:k": ["\ud800"]}, "['app:k'][0]", id="lone-surrogate"),
    pytest.param({"k": 2**64}, "['k']", id="beyond-8-bytes"),
]


async def raw_documents(store: Store) -> dict[str, list[Any]]:
    """Every document of every collection, as stored."""
    names = sorted(await store.database.list_collection_names())
    return {name: await store.database[name].find({}).sort("_id", 1).to_list(None)
            for name in names}  # fmt: skip


@pytest.mark.parametrize("bad, where", REFUSED)
async def test_state_no_store_can_hold_is_refused_naming_its_key_before_any_change(
    store: Store, bad: dict[str, Any], where: str
) -> None:
    """In `create_session` state and in an event's `state_delta`: a typed error naming
    the key (a `ValueError`, as ADK's database services raise), with nothing stored and
    neither the session handle nor the event changed; the handle appends after it."""
    service = MindstoreSessionService(store.scoped("acme"))
    shared = {"n": 0, "user:u": 1, "app:a": 1}
    session = await service.create_session(app_name=APP, user_id="u", state=shared)
    await service.append_event(session, said("first", {"n": 1}))
    before = await raw_documents(store)
    state = {"fine": "yes", "user:fine": 2, "app:fine": 3, "temp:t": NOT_UTF8, **bad}
    with pytest.raises(ValidationError, match=re.escape(f"state{where}")):
        await service.create_session(app_name=APP, user_id="u", state=state, session_id="s2")
    assert await raw_documents(store) == before
    assert await service.get_session(app_name=APP, user_id="u", session_id="s2") is None
    kept = session.model_copy(deep=True)
    marker = session._storage_update_marker
    event = said("refused", {"n": 2, "user:u": 2, "app:a": 2, "temp:t": "scratch", **bad})
    delta = dict(event.actions.state_delta)
    with pytest.raises(ValidationError, match=re.escape(f"event.actions.state_delta{where}")):
        await service.append_event(session, event)
    assert await raw_documents(store) == before
    assert (session.state, session.events, session.last_update_time) == (
        kept.state, kept.events, kept.last_update_time)  # fmt: skip
    assert session._storage_update_marker == marker and "temp:t" not in session.state
    assert event.actions.state_delta == delta  # its `temp:` keys still in it
    await service.append_event(session, said("second", {"n": 3}))  # the handle is current
    got = await service.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert got is not None and got.state == {"n": 3, "user:u": 1, "app:a": 1}
    assert [e.content.parts[0].text for e in got.events if e.content] == ["first", "second"]


async def test_bytes_in_state_are_stored_as_adks_sqlite_service_stores_them(
    store: Store, tmp_path: Any
) -> None:
    """Side by side with the installed ADK's `SqliteSessionService`: UTF-8 bytes are
    stored as their text, `temp:` keys take any value (never stored), and bytes that are
    not UTF-8 text (at any depth, as keys, in a model) are refused as a `ValueError` where
    it refuses them (google-adk 2.13 and older) and stored as its base64 text where it
    stores them (2.14 and later): the state read back, the stored event's delta and the
    appended event alike."""
    sqlite = pytest.importorskip("google.adk.sessions.sqlite_session_service")
    theirs = sqlite.SqliteSessionService(str(tmp_path / "adk.db"))
    ours = MindstoreSessionService(store.scoped("acme"))
    cases = [{"k": b"text"}, {"user:k": {"deep": [b"\xc3\xa9"]}}, {"temp:t": NOT_UTF8, "n": 1},
             {"k": NOT_UTF8}, {"app:k": [NOT_UTF8]}, {"user:k": {NOT_UTF8: (b"a", NOT_UTF8)}},
             {"k": Blob(raw=NOT_UTF8), "n": b"ok"}]  # fmt: skip

    async def outcome(service: BaseSessionService, case: dict[str, Any], user: str) -> Any:
        try:
            created = await service.create_session(app_name=APP, user_id=user, state=case)
        except ValueError:
            created = None
        session = await service.create_session(app_name=APP, user_id=user + "-append")
        event = said("x", case)
        try:
            await service.append_event(session, event)
        except ValueError:
            return created is not None, "refused"
        got = await service.get_session(app_name=APP, user_id=session.user_id,
                                        session_id=session.id)  # fmt: skip
        assert got is not None and created is not None
        stored = await service.get_session(app_name=APP, user_id=user, session_id=created.id)
        assert stored is not None
        stored_delta = got.events[-1].actions.state_delta
        return stored.state, got.state, stored_delta, event.actions.state_delta

    for n, case in enumerate(cases):
        assert await outcome(ours, case, f"u{n}") == await outcome(theirs, case, f"u{n}"), case


STATE_KEYS = st.tuples(st.sampled_from(["", "app:", "user:", "temp:"]),
                       st.text("abc", min_size=1, max_size=3)).map("".join)  # fmt: skip
WITH_BYTES = st.recursive(
    st.none() | st.integers(-(2**53), 2**53) | NAMES | st.binary(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NAMES, inner, max_size=3),
    max_leaves=6,
)  # fmt: skip


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(state=st.dictionaries(STATE_KEYS, WITH_BYTES, min_size=1, max_size=4))
def test_any_state_with_bytes_is_stored_as_adk_serializes_it_or_refused_unchanged(
    state: dict[str, Any],
) -> None:
    """The oracle is the installed ADK's own serializer of a session's state
    (`adk_state_json`): what it makes of the state is what reads back, what it refuses is
    refused with nothing stored."""
    kept = {key: value for key, value in state.items() if not key.startswith("temp:")}
    expected = adk_state_json(kept)
    hypothesis.event("refused" if expected is None else "stored")

    async def scenario() -> None:
        store = await mindstore.connect(
            TEST_URI or "embedded", database=f"mindstore_test_{uuid.uuid4().hex[:12]}"
        )
        try:
            service = MindstoreSessionService(store.scoped("acme"))
            session = await service.create_session(app_name=APP, user_id="u")
            before = await raw_documents(store)
            event = said("x", state)
            if expected is None:
                with pytest.raises(ValidationError):
                    await service.create_session(app_name=APP, user_id="u", state=state)
                with pytest.raises(ValidationError):
                    await service.append_event(session, event)
                assert await raw_documents(store) == before and session.state == {}
                return
            created = await service.create_session(app_name=APP, user_id="u", state=state)
            await service.append_event(session, event)
            for stored in (created, session):
                got = await service.get_session(app_name=APP, user_id="u", session_id=stored.id)
                assert got is not None and got.state == expected
        finally:
            if TEST_URI:
                await store.backend.client.drop_database(store.database.name)
            await store.close()

    asyncio.run(scenario())


# -- range reads -------------------------------------------------------------------------


async def long_session(service: MindstoreSessionService, store: Store, events: int) -> str:
    """A session of `events` events, written in batches the way `append_event` stores
    them (one message per event, its slot's id)."""
    session = await service.create_session(app_name=APP, user_id="erin", state={"k": "v"})
    task_id = session_task_id(APP, "erin", session.id)
    tasks = store.scoped("acme").tasks
    for start in range(1, events + 1, 500):
        batch = [
            message_for(
                Event(author="user", timestamp=1e9 + slot, content=types.Content(
                    role="user", parts=[types.Part(text=f"event {slot}")])),
                slot_id(task_id, slot), {"slot": slot, "state_at": 0},
            )
            for slot in range(start, min(start + 500, events + 1))
        ]  # fmt: skip
        await tasks.add_messages(task_id, batch)
    return session.id


async def test_recent_events_read_the_same_bytes_whatever_the_sessions_length(
    store: Store,
) -> None:
    service = MindstoreSessionService(store.scoped("acme"))
    costs = []
    for events in (100, 4000):
        session_id = await long_session(service, store, events)
        fresh = MindstoreSessionService(store.scoped("acme"))  # nothing cached
        with store.backend.recorder.capture() as log:
            got = await fresh.get_session(
                app_name=APP, user_id="erin", session_id=session_id,
                config=GetSessionConfig(num_recent_events=10),
            )  # fmt: skip
        assert got is not None and got.state == {"k": "v"}
        assert [e.timestamp for e in got.events] == [1e9 + n for n in range(events - 9, events + 1)]
        costs.append(log.bytes_received)
        after = await fresh.get_session(
            app_name=APP, user_id="erin", session_id=session_id,
            config=GetSessionConfig(after_timestamp=1e9 + events - 2),
        )  # fmt: skip
        assert after is not None and len(after.events) == 3
    assert costs[1] < costs[0] * 1.5  # the last ten and the state, not the history


# -- stale and concurrent appends --------------------------------------------------------


def said(words: str, delta: dict[str, Any] | None = None) -> Event:
    return Event(
        author="user", actions=EventActions(state_delta=delta or {}),
        content=types.Content(role="user", parts=[types.Part(text=words)]),
    )  # fmt: skip


async def test_a_stale_handle_stores_nothing(store: Store) -> None:
    service = MindstoreSessionService(store.scoped("acme"))
    session = await service.create_session(app_name=APP, user_id="u", state={"n": 0})
    stale = session.model_copy(deep=True)
    await service.append_event(session, said("first", {"n": 1}))
    with pytest.raises(StaleSessionError):
        await service.append_event(stale, said("late", {"n": 99, "user:x": 1, "app:y": 2}))
    got = await service.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert got is not None and got.state == {"n": 1}
    assert [e.content.parts[0].text for e in got.events if e.content] == ["first"]


async def test_concurrent_appends_on_one_handle_all_land_in_order(store: Store) -> None:
    service = MindstoreSessionService(store.scoped("acme"))
    session = await service.create_session(app_name=APP, user_id="u")
    events = [said(f"e{i}", {f"k{i}": i, "user:last": i}) for i in range(40)]
    await asyncio.gather(*(service.append_event(session, e) for e in events))
    got = await service.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert got is not None and got.events == events
    assert got.state == {**{f"k{i}": i for i in range(40)}, "user:last": 39}


async def test_two_stores_racing_on_one_session_lose_nothing(
    store: Store, stores: StoreFactory
) -> None:
    """Two processes append to one session: a writer overtaken reloads and retries (ADK's
    contract for `StaleSessionError`); every event lands once, each writer's in order."""
    services = [MindstoreSessionService(s.scoped("acme")) for s in (store, stores.sibling())]
    first = await services[0].create_session(app_name=APP, user_id="u")

    async def writer(service: MindstoreSessionService, name: str) -> int:
        handle = await service.get_session(app_name=APP, user_id="u", session_id=first.id)
        assert handle is not None
        stale = 0
        for i in range(25):
            event = said(f"{name}{i}", {f"{name}{i}": i, "user:count": i})
            while True:
                try:
                    await service.append_event(handle, event)
                    break
                except StaleSessionError:
                    stale += 1
                    handle = await service.get_session(
                        app_name=APP, user_id="u", session_id=first.id,
                        config=GetSessionConfig(num_recent_events=0),
                    )  # fmt: skip
                    assert handle is not None
        return stale

    stale = await asyncio.gather(writer(services[0], "a"), writer(services[1], "b"))
    got = await services[1].get_session(app_name=APP, user_id="u", session_id=first.id)
    assert got is not None
    words = [e.content.parts[0].text for e in got.events if e.content]
    assert sorted(words) == sorted([f"a{i}" for i in range(25)] + [f"b{i}" for i in range(25)])
    for name in "ab":
        assert [w for w in words if w[0] == name] == [f"{name}{i}" for i in range(25)]
        assert all(got.state[f"{name}{i}"] == i for i in range(25))
    assert sum(stale) > 0  # they really raced


@pytest.mark.filterwarnings("ignore:.*BUFFERED_SESSION_SERVICE:UserWarning")
async def test_adks_buffered_service_writes_through_it_as_through_adks_own(store: Store) -> None:
    """google-adk 2.15's `BufferedSessionService` (it queues appends and sends them in the
    background, through `append_event`, as mindstore does not override `append_events`):
    two sessions' interleaved events with session, `app:`, `user:` and `temp:` deltas, then
    a flush, read back from the wrapped service the same as from ADK's in-memory one."""
    buffered = getattr(google.adk.sessions, "BufferedSessionService", None)
    if buffered is None:
        pytest.skip("this google-adk has no BufferedSessionService (2.15 added it)")
    events = [said(f"turn {n}", {"n": n, "temp:t": n, "app:a": n, "user:u": -n})
              for n in range(6)]  # fmt: skip
    read: list[Any] = []
    for delegate in (MindstoreSessionService(store.scoped("acme")), InMemorySessionService()):
        async with buffered(delegate) as service:
            sessions = [
                await service.create_session(
                    app_name=APP, user_id="u", session_id=name, state={"n": -1, "user:v": name}
                )
                for name in ("s1", "s2")
            ]
            for n, event in enumerate(events):
                await service.append_event(sessions[n % 2], event.model_copy(deep=True))
            for session in sessions:
                await service.flush_session(app_name=APP, user_id="u", session_id=session.id)
            got = [await delegate.get_session(app_name=APP, user_id="u", session_id=name)
                   for name in ("s1", "s2")]  # fmt: skip
            read.append([(s.state, s.events) for s in got if s is not None])
    assert read[0] == read[1] and len(read[0]) == 2
    assert [len(events) for _, events in read[0]] == [3, 3]


# -- the event and its shared state: one commit point -------------------------------------


class Crash(BaseException):
    """The writing process dies (not an `Exception`: nothing on the way catches it)."""


class CrashingTasks:
    """A view's tasks whose write of an event into a session task dies just `before` or
    just `after` it is stored (`never`: it does not); every other call goes through."""

    def __init__(self, tasks: Any, when: str) -> None:
        self._inner = tasks
        self._when = when

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def add_messages(self, task_id: str, messages: Any) -> Any:
        if self._when == "never" or not task_id.startswith("_:adk-s:"):
            return await self._inner.add_messages(task_id, messages)
        if self._when == "before":
            raise Crash
        await self._inner.add_messages(task_id, messages)
        raise Crash


class CrashingView:
    def __init__(self, view: Any, when: str) -> None:
        self.tasks = CrashingTasks(view.tasks, when)


SHARED = {"user:city": "Oslo", "app:calls": 1, "own": "x"}


async def _read_back(service: MindstoreSessionService, how: str, session_id: str) -> dict[str, Any]:
    """The merged state as one of the readers of shared state sees it."""
    if how == "get_session":
        got = await service.get_session(app_name=APP, user_id="u", session_id=session_id)
        assert got is not None
        return dict(got.state)
    if how == "list_sessions":
        (listed,) = (await service.list_sessions(app_name=APP, user_id="u")).sessions
        return dict(listed.state)
    user = await service.get_user_state(app_name=APP, user_id="u")
    return {f"user:{key}": value for key, value in user.items()}


@pytest.mark.parametrize("how", ["get_session", "list_sessions", "get_user_state"])
async def test_a_crash_after_the_event_leaves_its_shared_state_to_the_next_reader(
    store: Store, stores: StoreFactory, how: str
) -> None:
    """The event's write is the commit point: its `app:`/`user:` delta is seen by every
    reader of shared state from then on, though the writer died before applying it."""
    dying = MindstoreSessionService(CrashingView(store.scoped("acme"), "after"))
    other = MindstoreSessionService(stores.sibling().scoped("acme"))
    session = await other.create_session(app_name=APP, user_id="u")
    with pytest.raises(Crash):
        await dying.append_event(session, said("hi", SHARED))
    state = await _read_back(other, how, session.id)
    assert state["user:city"] == "Oslo"
    if how != "get_user_state":
        assert state == SHARED
    again = await other.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert again is not None and again.state == SHARED  # applied once, still there


async def test_a_crash_before_the_event_leaves_neither(store: Store, stores: StoreFactory) -> None:
    """An intent whose event never landed is not seen, then dropped after the grace; the
    slot's next event (another writer's) does not bring the dead delta back."""
    dying = MindstoreSessionService(CrashingView(store.scoped("acme"), "before"))
    patient = MindstoreSessionService(stores.sibling().scoped("acme"))
    session = await patient.create_session(app_name=APP, user_id="u", state={"app:calls": 0})
    with pytest.raises(Crash):
        await dying.append_event(session.model_copy(deep=True), said("lost", SHARED))
    got = await patient.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert got is not None and got.state == {"app:calls": 0} and got.events == []
    user_register = register_task_id("user", APP, "u")
    pending = await store.scoped("acme").tasks.tail(user_register, 1)
    assert "intent" in pending[-1].metadata["adk"]  # recorded, waiting for its event
    hasty = MindstoreSessionService(stores.sibling().scoped("acme"), grace=0.0)
    assert await hasty.get_user_state(app_name=APP, user_id="u") == {}
    after = await store.scoped("acme").tasks.tail(user_register, 1)
    assert after[-1].metadata["adk"]["pending"] == []  # dropped
    await patient.append_event(got, said("next", {"user:mood": "ok"}))
    final = await hasty.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert final is not None and final.state == {"app:calls": 0, "user:mood": "ok"}


async def test_a_pending_intent_is_applied_when_its_event_lands_late(store: Store) -> None:
    """A reader meeting an intent whose event is not stored yet leaves it pending (not
    dropped within the grace), and applies it once the event is stored."""
    service = MindstoreSessionService(store.scoped("acme"))
    session = await service.create_session(app_name=APP, user_id="u")
    tasks = store.scoped("acme").tasks
    landed = asyncio.Event()
    read_between = asyncio.Event()
    original = tasks.add_messages

    async def held(task_id: str, messages: Any) -> Any:
        if task_id.startswith("_:adk-s:"):
            landed.set()
            await read_between.wait()
        return await original(task_id, messages)

    held_service = MindstoreSessionService(CrashingView(store.scoped("acme"), "never"))
    held_service._tasks.add_messages = held  # type: ignore[method-assign]
    append = asyncio.create_task(held_service.append_event(session, said("hi", SHARED)))
    await landed.wait()
    assert await service.get_user_state(app_name=APP, user_id="u") == {}  # not committed
    read_between.set()
    await append
    assert await service.get_user_state(app_name=APP, user_id="u") == {"city": "Oslo"}


async def test_two_stores_sharing_user_state_with_a_crashing_writer_lose_nothing(
    store: Store, stores: StoreFactory
) -> None:
    """Two processes append to two sessions of one user, each changing shared state; one
    dies after every third event's write. Every committed delta is in the shared state once
    (the app counter of committed events is exact)."""
    view = stores.sibling().scoped("acme")
    services = [MindstoreSessionService(store.scoped("acme")), MindstoreSessionService(view)]
    sessions = [await s.create_session(app_name=APP, user_id="u") for s in services]
    dying = MindstoreSessionService(CrashingView(view, "after"))

    async def writer(index: int) -> None:
        service, handle = services[index], sessions[index]
        for i in range(15):
            event = said(f"{index}-{i}", {f"user:w{index}-{i}": i, f"app:w{index}-{i}": i})
            if index == 1 and i % 3 == 0:
                with pytest.raises(Crash):
                    await dying.append_event(handle.model_copy(deep=True), event)
                handle = await service.get_session(app_name=APP, user_id="u",
                                                   session_id=handle.id)  # fmt: skip
                assert handle is not None
            else:
                await service.append_event(handle, event)

    await asyncio.gather(writer(0), writer(1))
    user = await services[0].get_user_state(app_name=APP, user_id="u")
    assert user == {f"w{w}-{i}": i for w in (0, 1) for i in range(15)}
    got = await services[1].get_session(app_name=APP, user_id="u", session_id=sessions[0].id)
    assert got is not None
    assert {k: v for k, v in got.state.items() if k.startswith("app:")} == {
        f"app:w{w}-{i}": i for w in (0, 1) for i in range(15)
    }


# -- hostile input -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "field, value",
    [
        ("app_name", ""), ("app_name", "x" * 513), ("user_id", "a\x00b"),
        ("user_id", 42), ("session_id", "s\nid"), ("session_id", "x" * 513),
        ("user_id", "\ud800"),
    ],
)  # fmt: skip
async def test_hostile_ids_get_a_typed_error_and_store_nothing(
    store: Store, field: str, value: Any
) -> None:
    service = MindstoreSessionService(store.scoped("acme"))
    names = {"app_name": APP, "user_id": "u", "session_id": "s", field: value}
    with pytest.raises(ValidationError, match=field):
        await service.create_session(**names)
    with pytest.raises(ValidationError, match=field):
        await service.get_session(**names)
    assert (await store.scoped("acme").tasks.list()).items == []


async def test_any_id_adk_accepts_names_a_session(store: Store) -> None:
    service = MindstoreSessionService(store.scoped("acme"))
    odd = {"app_name": "org/app $1", "user_id": "ada@example.com/ä", "session_id": "x" * 512}
    session = await service.create_session(**odd, state={"user:k": "v"})
    await service.append_event(session, said("hi"))
    got = await service.get_session(**odd)
    assert got == session
    assert [s.id for s in (await service.list_sessions(app_name=odd["app_name"])).sessions] == [
        "x" * 512
    ]
    user_register = register_task_id("user", odd["app_name"], odd["user_id"])
    assert (await store.scoped("acme").tasks.get(user_register)).owner == owner_of(odd["user_id"])


def test_the_docs_example_runs() -> None:
    """docs/integrations.md, "Google ADK": the example runs as it is (tests/
    test_integrations_docs.py runs the other frameworks' the same way)."""
    code = compile(example("Google ADK"), "docs/integrations.md (Google ADK)", "exec")
    exec(code, {"__name__": "__main__"})  # the documented example itself


async def test_an_owner_scoped_view_is_refused(store: Store) -> None:
    """The ADK user is the owner, and `app:` state spans owners: a tenant view only."""
    with pytest.raises(ValidationError, match="view"):
        MindstoreSessionService(store.scoped("acme", owner="ann"))


@pytest.mark.parametrize("name, method", sorted(_methods(MindstoreSessionService, "adk")))
def test_the_public_methods_document_themselves(name: str, method: Any) -> None:
    """The bar tests/test_api_docstrings.py holds the other integrations to."""
    doc = inspect.cleandoc(method.__doc__ or "")
    assert doc, name
    parameters = [p for p in inspect.signature(method).parameters if p not in ("self", "cls")]
    assert _section(doc, "Args") == parameters, name
    for error in _section(doc, "Raises"):  # dotted ADK errors are named in full, unmatched
        assert hasattr(mindstore.errors, error) or isinstance(getattr(builtins, error, None),
                                                              type), (name, error)  # fmt: skip
