"""`MindstoreSaver` driven by LangGraph itself: real `StateGraph`s compiled with the saver
and with LangGraph's own `InMemorySaver` side by side (a scripted node as the model, no
network), the `langgraph-checkpoint-conformance` suite, and what is stored."""

from __future__ import annotations

import asyncio
import functools
import uuid
from typing import Annotated, TypedDict

import pytest

pytest.importorskip("langgraph")

from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    message_to_dict,
)
from langchain_core.tools import tool
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition

from mindstore.backends.recorder import observe_all
from mindstore.documents import LANGGRAPH_BLOBS, LANGGRAPH_CHECKPOINTS, LANGGRAPH_WRITES
from mindstore.errors import Conflict, NotFound, ValidationError
from mindstore.integrations import langgraph_keys as keys
from mindstore.integrations.langgraph import MindstoreSaver
from mindstore.integrations.langgraph_writes import REF, match
from mindstore.model.messages import AssistantMessage, ToolMessage
from mindstore.model.parts import ToolCallPart


@tool
def search(query: str) -> str:
    """Search the manual."""
    return f"The manual says {query!r} is covered in chapter 4."


class ScriptedModel:
    """A node standing in for a chat model: a tool call for each question, then an answer."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, state: MessagesState) -> dict:
        self.calls += 1
        last = state["messages"][-1]
        if isinstance(last, HumanMessage):
            call = {
                "name": "search",
                "args": {"query": str(last.content)[:30]},
                "id": f"call_{self.calls}",
            }
            return {"messages": [AIMessage(content="", id=f"ai-{self.calls}", tool_calls=[call],
                                           usage_metadata={"input_tokens": 50, "output_tokens": 9,
                                                           "total_tokens": 59})]}  # fmt: skip
        return {
            "messages": [
                AIMessage(content=f"Answer {self.calls}: see chapter 4.", id=f"ai-{self.calls}")
            ]
        }


def agent_graph(checkpointer):
    builder = StateGraph(MessagesState)
    builder.add_node("agent", ScriptedModel())
    builder.add_node("tools", ToolNode([search]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


QUESTIONS = ["What about billing?", "And refunds?", "Who signs off?"]


async def converse(graph, thread: str, questions=QUESTIONS) -> None:
    config = {"configurable": {"thread_id": thread}}
    for i, question in enumerate(questions):
        await graph.ainvoke({"messages": [HumanMessage(question, id=f"{thread}-h{i}")]}, config)


def plain(value):
    """A state value with the random ids LangGraph gives id-less messages (uuid4) masked,
    so two runs of the same graph compare equal."""
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    if isinstance(value, BaseMessage):
        data = message_to_dict(value)
        if isinstance(value.id, str) and len(value.id) == 36 and value.id.count("-") == 4:
            data["data"]["id"] = "<uuid>"
        return data
    return value


def snapshot(state) -> tuple:
    return (plain(state.values), state.next, state.metadata.get("source"),
            state.metadata.get("step"),
            [(t.name, t.error, plain(t.result)) for t in state.tasks])  # fmt: skip


async def history(graph, config) -> list[tuple]:
    return [snapshot(s) async for s in graph.aget_state_history(config)]


async def test_the_conformance_suite_passes_every_capability(store):
    from langgraph.checkpoint.conformance import checkpointer_test, validate
    from langgraph.checkpoint.conformance.capabilities import Capability

    @checkpointer_test(name="MindstoreSaver")
    async def factory():
        yield MindstoreSaver(store.scoped(f"conf{uuid.uuid4().hex[:6]}"))

    report = await validate(factory)
    assert report.passed_all_base()
    assert report.passed_all(), report.to_dict()
    assert all(result.detected and result.passed for result in report.results.values())
    assert len(report.results) == len(Capability)  # every capability the installed suite knows
    results = report.to_dict()["results"].values()
    assert sum(r["tests_passed"] for r in results) >= 81 and not any(
        r["tests_failed"] for r in results
    )


class DeltaState(TypedDict):
    """A messages channel kept as a `DeltaChannel` (beta): checkpoints hold a snapshot every
    third update, the rest is rebuilt from writes (`get_delta_channel_history`)."""

    messages: Annotated[list, DeltaChannel(
        lambda state, writes: functools.reduce(add_messages, writes, state),
        snapshot_frequency=3)]  # fmt: skip


def delta_graph(checkpointer):
    builder = StateGraph(DeltaState)
    builder.add_node(
        "reply",
        lambda s: {
            "messages": [AIMessage(f"seen {len(s['messages'])}", id=f"r{len(s['messages'])}")]
        },
    )
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    return builder.compile(checkpointer=checkpointer)


async def test_a_delta_channel_thread_matches_in_memory_saver(acme):
    ours, theirs = MindstoreSaver(acme), InMemorySaver()
    config = {"configurable": {"thread_id": "delta"}}
    for saver in (ours, theirs):
        await converse(delta_graph(saver), "delta", [f"q{i}" for i in range(5)])
    assert await history(delta_graph(ours), config) == await history(delta_graph(theirs), config)
    pairs = zip(
        [t async for t in ours.alist(config)], [t async for t in theirs.alist(config)], strict=True
    )
    for mine_tuple, their_tuple in pairs:  # newest first, step by step
        mine = await ours.aget_delta_channel_history(
            config=mine_tuple.config, channels=["messages"]
        )
        reference = await theirs.aget_delta_channel_history(
            config=their_tuple.config, channels=["messages"]
        )
        written = [
            [(channel, plain(value)) for _, channel, value in h["messages"]["writes"]]
            for h in (mine, reference)
        ]
        assert written[0] == written[1]  # (task ids hash the checkpoint id: not compared)
        seeds = [h["messages"].get("seed") for h in (mine, reference)]
        assert [type(seed) for seed in seeds] == [type(seed) for seed in reversed(seeds)]
        assert plain(getattr(seeds[0], "value", seeds[0])) == plain(
            getattr(seeds[1], "value", seeds[1])
        )
    assert any(
        getattr(t.checkpoint["channel_values"].get("messages"), "value", None)
        for t in [t async for t in ours.alist(config)]
    )


async def test_a_tool_calling_graph_matches_in_memory_saver_step_by_step(acme):
    ours, theirs = agent_graph(MindstoreSaver(acme)), agent_graph(InMemorySaver())
    await converse(ours, "t1")
    await converse(theirs, "t1")
    config = {"configurable": {"thread_id": "t1"}}
    assert snapshot(await ours.aget_state(config)) == snapshot(await theirs.aget_state(config))
    mine, reference = await history(ours, config), await history(theirs, config)
    assert len(mine) == len(reference) == 3 * 5
    assert mine == reference


async def test_each_message_is_stored_once_typed_and_tracked(store, acme):
    graph = agent_graph(MindstoreSaver(acme))
    await converse(graph, "t2")
    final = (await graph.aget_state({"configurable": {"thread_id": "t2"}})).values["messages"]
    stored = await acme.tasks.messages("t2")
    assert [m.id for m in stored] == [m.id for m in final] and len(stored) == 12
    assert isinstance(stored[1], AssistantMessage) and isinstance(
        stored[1].content[0], ToolCallPart
    )
    assert isinstance(stored[2], ToolMessage) and stored[2].content[0].tool_name == "search"
    record = await acme.tasks.get("t2")
    assert record.open_tool_call_ids == [] and record.usage.tokens_in == 3 * 50
    # no checkpoint, write or blob holds a serialized message: writes refer to the task
    database = store.database
    writes = await database[LANGGRAPH_WRITES].find({"tenant": "acme"}).to_list(length=None)
    message_writes = [item for doc in writes for item in doc["w"] if item[1] == "messages"]
    assert message_writes and all(item[2] == REF for item in message_writes)
    blobs = await database[LANGGRAPH_BLOBS].find({"tenant": "acme"}).to_list(length=None)
    assert all(blob["t"] == "@refmap" for blob in blobs if blob["_id"].endswith("~__start__"))
    checkpoints = (
        await database[LANGGRAPH_CHECKPOINTS].find({"tenant": "acme"}).to_list(length=None)
    )
    assert all(b"chapter 4" not in bytes(doc["c"][1]) for doc in checkpoints)


async def test_time_travel_branches_into_its_own_task_and_keeps_both_timelines(acme):
    ours, theirs = agent_graph(MindstoreSaver(acme)), agent_graph(InMemorySaver())
    for graph in (ours, theirs):
        await converse(graph, "t3", QUESTIONS[:2])
    config = {"configurable": {"thread_id": "t3"}}

    async def fork(graph):
        states = [s async for s in graph.aget_state_history(config)]
        earlier = next(s for s in states if len(s.values.get("messages", [])) == 4 and not s.next)
        await graph.ainvoke(
            {"messages": [HumanMessage("Instead: shipping?", id="f1")]}, earlier.config
        )
        return earlier

    earlier, reference = await fork(ours), await fork(theirs)
    assert snapshot(await ours.aget_state(config)) == snapshot(await theirs.aget_state(config))
    assert await history(ours, config) == await history(theirs, config)
    assert len(await acme.tasks.messages("t3")) == 8  # the first timeline, untouched
    branches = [
        r
        for r in (await acme.tasks.list()).items
        if r.metadata and r.metadata.get("thread_id") == "t3" and r.id != "t3"
    ]
    assert (
        len(branches) == 1 and branches[0].seq == 8
    )  # the 4 kept messages, copied once, and 4 new
    assert snapshot(await ours.aget_state(earlier.config)) == snapshot(
        await theirs.aget_state(reference.config)
    )


async def test_update_state_on_an_earlier_checkpoint_matches_in_memory_saver(acme):
    ours, theirs = agent_graph(MindstoreSaver(acme)), agent_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "t7"}}
    for graph in (ours, theirs):
        await converse(graph, "t7", QUESTIONS[:2])
        states = [s async for s in graph.aget_state_history(config)]
        earlier = next(s for s in states if len(s.values.get("messages", [])) == 4 and not s.next)
        forked = await graph.aupdate_state(earlier.config,
                                           {"messages": [HumanMessage("A note.", id="n1")]},
                                           as_node="tools")  # fmt: skip
        await graph.ainvoke(None, forked)
    assert snapshot(await ours.aget_state(config)) == snapshot(await theirs.aget_state(config))
    assert await history(ours, config) == await history(theirs, config)


def trimming_graph(checkpointer):
    """A node that removes the oldest messages (a `RemoveMessage`), then replies."""

    def reply(state: MessagesState) -> dict:
        messages = state["messages"]
        removals = [RemoveMessage(id=m.id) for m in messages[:-3]] if len(messages) > 4 else []
        return {
            "messages": [
                *removals,
                AIMessage(
                    f"reply to {messages[-1].content}", id=f"r-{len(messages)}-{messages[-1].id}"
                ),
            ]
        }

    builder = StateGraph(MessagesState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    return builder.compile(checkpointer=checkpointer)


async def test_removed_messages_start_a_task_of_their_own_and_the_thread_goes_on(store, acme):
    ours, theirs = trimming_graph(MindstoreSaver(acme)), trimming_graph(InMemorySaver())
    questions = [f"q{i}" for i in range(5)]
    for graph in (ours, theirs):
        await converse(graph, "t4", questions)
    config = {"configurable": {"thread_id": "t4"}}
    assert snapshot(await ours.aget_state(config)) == snapshot(await theirs.aget_state(config))
    assert await history(ours, config) == await history(theirs, config)
    rows = await store.database[LANGGRAPH_CHECKPOINTS].find({"tenant": "acme"}).to_list(length=None)
    assert not any(row.get("ms", {}).get("b") for row in rows)  # every version is messages
    # a rewritten version starts a task holding it; the steps after it append there
    assert any(row.get("ms", {}).get("t") for row in rows)
    assert not await store.database[LANGGRAPH_BLOBS].count_documents(
        {"tenant": "acme", "_id": {"$regex": "~messages$"}}
    )


class Opaque:
    """A value no document can hold (it has no BSON form)."""

    def __eq__(self, other):
        return isinstance(other, Opaque)


def opaque_graph(checkpointer):
    """Replies carry a Python object in `additional_kwargs`: the saver keeps such a list
    as a blob, and the thread goes on."""

    def reply(state: MessagesState) -> dict:
        n = len(state["messages"])
        extra = {"o": Opaque()} if n == 3 else {}
        return {"messages": [AIMessage(f"reply {n}", id=f"r-{n}", additional_kwargs=extra)]}

    builder = StateGraph(MessagesState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    return builder.compile(checkpointer=checkpointer)


async def test_messages_no_document_can_hold_are_a_blob_and_the_thread_goes_on(store, acme):
    serde = JsonPlusSerializer(pickle_fallback=True)
    ours, theirs = (
        opaque_graph(MindstoreSaver(acme, serde=serde)),
        opaque_graph(InMemorySaver(serde=serde)),
    )
    for graph in (ours, theirs):
        await converse(graph, "t8", ["a", "b", "c"])
    config = {"configurable": {"thread_id": "t8"}}
    assert snapshot(await ours.aget_state(config)) == snapshot(await theirs.aget_state(config))
    assert await history(ours, config) == await history(theirs, config)
    rows = await store.database[LANGGRAPH_CHECKPOINTS].find({"tenant": "acme"}).to_list(length=None)
    assert any(row.get("ms", {}).get("b") for row in rows)


def subgraph_graph(checkpointer):
    inner = StateGraph(MessagesState)
    inner.add_node(
        "inner",
        lambda s: {
            "messages": [
                AIMessage(f"inner saw {len(s['messages'])}", id=f"in-{len(s['messages'])}")
            ]
        },
    )
    inner.add_edge(START, "inner")
    outer = StateGraph(MessagesState)
    outer.add_node("sub", inner.compile())
    outer.add_node(
        "outer", lambda s: {"messages": [AIMessage("outer done", id=f"out-{len(s['messages'])}")]}
    )
    outer.add_edge(START, "sub")
    outer.add_edge("sub", "outer")
    return outer.compile(checkpointer=checkpointer)


async def test_a_subgraph_namespace_keeps_its_own_state(acme):
    ours, theirs = subgraph_graph(MindstoreSaver(acme)), subgraph_graph(InMemorySaver())
    for graph in (ours, theirs):
        await converse(graph, "t5", ["one", "two"])
    config = {"configurable": {"thread_id": "t5"}}
    assert snapshot(await ours.aget_state(config, subgraphs=True)) == snapshot(
        await theirs.aget_state(config, subgraphs=True)
    )
    assert await history(ours, config) == await history(theirs, config)


async def test_the_sync_graph_runs_from_a_worker_thread(acme):
    saver = MindstoreSaver(acme)
    graph = agent_graph(saver)
    config = {"configurable": {"thread_id": "t6"}}
    result = await asyncio.to_thread(
        graph.invoke, {"messages": [HumanMessage("sync?", id="s1")]}, config
    )
    assert result["messages"][-1].content.startswith("Answer")
    states = await asyncio.to_thread(lambda: list(graph.get_state_history(config)))
    assert len(states) == 5
    with pytest.raises(RuntimeError, match="async"):
        saver.get_tuple(config)  # from the loop's own thread: refused, not a deadlock


async def test_delete_copy_and_prune_keep_the_other_threads_whole(store, acme):
    saver = MindstoreSaver(acme)
    graph = agent_graph(saver)
    await converse(graph, "src", QUESTIONS[:2])
    await converse(graph, "other", QUESTIONS[:1])
    source = {"configurable": {"thread_id": "src"}}
    await saver.acopy_thread("src", "dst")
    target = {"configurable": {"thread_id": "dst"}}
    assert [s[0] for s in await history(graph, target)] == [
        s[0] for s in await history(graph, source)
    ]
    await saver.adelete_thread("src")
    assert (
        await graph.aget_state(source) is not None and (await graph.aget_state(source)).values == {}
    )
    assert (
        len((await graph.aget_state(target)).values["messages"]) == 8
    )  # the copy has its own task
    before = snapshot(await graph.aget_state(target))
    await saver.aprune(["dst"], strategy="keep_latest")
    assert snapshot(await graph.aget_state(target)) == before
    assert len(await history(graph, target)) == 1
    assert (
        len((await graph.aget_state({"configurable": {"thread_id": "other"}})).values["messages"])
        == 4
    )
    tasks = {record.id for record in (await acme.tasks.list()).items}
    assert "src" not in tasks and {"dst", "other"} <= tasks


async def test_a_thread_id_names_one_conversation_per_tenant_on_owner_views(store):
    ann, bob = store.scoped("acme", owner="ann"), store.scoped("acme", owner="bob")
    graph_ann, graph_bob = agent_graph(MindstoreSaver(ann)), agent_graph(MindstoreSaver(bob))
    await converse(graph_ann, "shared", QUESTIONS[:1])
    await converse(graph_bob, "bobs", QUESTIONS[1:2])
    config = {"configurable": {"thread_id": "shared"}}
    assert (await graph_ann.aget_state(config)).values["messages"][0].content == QUESTIONS[0]
    assert [m.id for m in await ann.tasks.messages("shared")] == [
        m.id for m in (await graph_ann.aget_state(config)).values["messages"]
    ]
    assert (await bob.tasks.get("bobs")).owner == "bob"
    before = await store.database["tasks"].find_one({"tenant": "acme", "owner": "ann"})
    with pytest.raises(NotFound, match="another owner"):  # ann's conversation, as for sessions
        await converse(graph_bob, "shared", QUESTIONS[1:2])
    assert await store.database["tasks"].find_one({"tenant": "acme", "owner": "ann"}) == before
    seen = (await graph_bob.aget_state(config)).values.get("messages") or []
    assert [m.content for m in seen] == [QUESTIONS[1]]  # bob's input only, nothing of ann's
    assert len(await history(graph_ann, config)) == 5


async def test_bad_ids_and_a_foreign_task_are_refused(store, acme):
    saver = MindstoreSaver(acme)
    for bad in ("", "x" * 513, "a\x00b", None, 1.5):
        with pytest.raises(ValidationError, match="thread_id"):
            await saver.aget_tuple({"configurable": {"thread_id": bad}})
    with pytest.raises(ValidationError, match="checkpoint_id"):
        await saver.aget_tuple({"configurable": {"thread_id": "t", "checkpoint_id": "a/b"}})
    with pytest.raises(ValidationError, match="strategy"):
        await saver.aprune(["t"], strategy="everything")
    await acme.tasks.create(task_id="mine")
    with pytest.raises(Conflict, match="mine"):
        await converse(agent_graph(saver), "mine", QUESTIONS[:1])
    assert await acme.tasks.messages("mine") == []


def test_writes_merge_like_in_memory_saver():
    stored = [[0, "a", "t", b"1"], [-1, "__error__", "t", b"e"]]
    merged = keys.merge_writes(
        stored, [[0, "a", "t", b"2"], [1, "b", "t", b"3"], [-1, "__error__", "t", b"f"]]
    )
    assert merged == [[0, "a", "t", b"1"], [1, "b", "t", b"3"], [-1, "__error__", "t", b"f"]]


def test_a_written_message_without_id_matches_the_appended_one():
    appended = [HumanMessage("x", id="1"), AIMessage("y", id="2"), AIMessage("z", id="3")]
    assert match([AIMessage("y"), AIMessage("z", id="3")], appended) == 1
    assert match([AIMessage("z"), AIMessage("y")], appended) is None
    assert match([AIMessage("y", id="other")], appended) is None


SEGMENT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=20)


@given(tenant=st.sampled_from(["acme", "a-b.c"]), thread=SEGMENT,
       ns=st.one_of(st.just(""), SEGMENT), other=SEGMENT,
       checkpoint=st.uuids().map(str))  # fmt: skip
def test_a_scope_is_exactly_its_key_range(tenant, thread, ns, other, checkpoint):
    prefix = keys.scope_prefix(tenant, thread, ns)
    bounds = keys.prefix_range(prefix)
    inside = keys.checkpoint_key(tenant, thread, ns, checkpoint)
    assert bounds["$gt"] < inside < bounds["$lt"]
    assert (
        keys.thread_prefix(tenant, thread)
        < inside
        < keys.prefix_range(keys.thread_prefix(tenant, thread))["$lt"]
    )
    if other != thread:
        outside = keys.checkpoint_key(tenant, other, ns, checkpoint)
        assert not bounds["$gt"] < outside < bounds["$lt"]


@given(
    moment=st.datetimes(timezones=st.just(__import__("datetime").timezone.utc)),
    checkpoint=st.uuids(),
)
def test_packed_timestamps_and_ids_come_back_exactly(moment, checkpoint):
    text = moment.isoformat()
    assert keys.unpack_ts(keys.pack_ts(text)) == text
    assert keys.unpack_id(keys.pack_id(str(checkpoint))) == str(checkpoint)
    assert keys.pack_ts("yesterday") == "yesterday" and keys.pack_id("not-a-uuid") == "not-a-uuid"


VERSIONS = st.one_of(st.integers(0, 10**9), st.text(max_size=8), st.floats(allow_nan=False))
CHANNELS = st.text(min_size=1, max_size=12)


@given(versions=st.dictionaries(CHANNELS, VERSIONS, max_size=5),
       seen=st.dictionaries(CHANNELS, st.dictionaries(CHANNELS, VERSIONS, max_size=4), max_size=4),
       updated=st.one_of(st.none(), st.lists(CHANNELS, max_size=4)),
       task=st.one_of(st.uuids().map(str), SEGMENT))  # fmt: skip
def test_packed_checkpoints_and_task_ids_come_back_exactly(versions, seen, updated, task):
    checkpoint = {"v": 4, "id": "x", "ts": "2026-01-02T03:04:05.000006+00:00",
                  "channel_values": {}, "channel_versions": versions, "versions_seen": seen,
                  "updated_channels": updated, "extra": [1]}  # fmt: skip
    back = keys.unpack_checkpoint(keys.pack_checkpoint(checkpoint))
    assert back == {k: v for k, v in checkpoint.items() if k not in ("id", "channel_values")}
    assert list(back["channel_versions"]) == list(versions)  # order kept
    assert keys.split_writes_key(keys.writes_key("acme", "t", "", "cid", task)) == (
        keys.checkpoint_key("acme", "t", "", "cid"),
        task,
    )


def test_a_sync_graph_in_a_script_without_a_loop():
    import mindstore

    store = asyncio.run(mindstore.connect("embedded"))
    saver = MindstoreSaver(store.scoped("acme"))
    graph = agent_graph(saver)
    config = {"configurable": {"thread_id": "script"}}
    for i, question in enumerate(QUESTIONS[:2]):
        graph.invoke({"messages": [HumanMessage(question, id=f"s{i}")]}, config)
    assert len(graph.get_state(config).values["messages"]) == 8
    assert len(list(graph.get_state_history(config))) == 10
    saver.delete_thread("script")
    assert graph.get_state(config).values == {}
    asyncio.run(store.close())


@pytest.mark.parametrize("parent", [False, True])
@pytest.mark.parametrize("messages", [False, True])
async def test_re_putting_a_stored_checkpoint_without_new_versions_keeps_its_values(
    acme, parent, messages
):
    """Issue 45: `aput(config, checkpoint, metadata, {})` for a checkpoint id already stored
    left its `channel_values` empty; `InMemorySaver` keeps them (its blobs are by version)."""
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.base import empty_checkpoint

    said = [HumanMessage(content="hi", id="m1"), AIMessage(content="hello", id="m2")]
    base = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    results = []
    for saver in (MindstoreSaver(acme), InMemorySaver()):
        first = {**empty_checkpoint(), "id": "1ef0000000000000000000000000001",
                 "channel_values": {"count": 1}, "channel_versions": {"count": "1"}}  # fmt: skip
        input_step = {"source": "input", "step": -1}
        parent_config = await saver.aput(base, first, input_step, {"count": "1"})
        values = {"count": 2, "note": "x" * 5000}  # one inline, one a blob
        versions = {"count": "2", "note": "2"}
        if messages:
            values["messages"], versions["messages"] = said, "2"
        second = {**empty_checkpoint(), "id": "1ef0000000000000000000000000002",
                  "channel_values": values, "channel_versions": versions}  # fmt: skip
        config = parent_config if parent else base
        stored = await saver.aput(config, second, {"source": "loop", "step": 0}, versions)
        again = await saver.aput(config, second, {"source": "loop", "step": 0}, {})
        assert again == stored
        got = await saver.aget_tuple(stored)
        results.append((plain(got.checkpoint["channel_values"]), got.metadata["step"]))
        assert (await saver.aget_tuple(parent_config)).checkpoint["channel_values"] == {"count": 1}
    ours, theirs = results
    assert ours == theirs
    assert ours[0]["count"] == 2 and ours[0]["note"] == "x" * 5000


def commands(log) -> list[str]:
    """The commands sent to the checkpoints collection, in order."""
    return [c.name.lower() for c in log if c.collection == LANGGRAPH_CHECKPOINTS]


async def test_a_put_after_the_savers_last_reads_nothing_and_a_re_put_reads_once(acme):
    """Keeping a re-put's values costs one read of the stored checkpoint (its parent in the
    same read); a put following the saver's own last put reads nothing, as before."""
    from langgraph.checkpoint.base import empty_checkpoint

    saver = MindstoreSaver(acme)
    base = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    config = base
    made = []
    for number in (1, 2):
        checkpoint = {**empty_checkpoint(), "id": f"1ef000000000000000000000000000{number}",
                      "channel_values": {"n": number},
                      "channel_versions": {"n": str(number)}}  # fmt: skip
        with observe_all() as log:
            config = await saver.aput(config, checkpoint, {"step": number}, {"n": str(number)})
        made.append((checkpoint, commands(log)))
    assert made[1][1] == ["update"]  # after the saver's last put: no read
    with observe_all() as log:
        await MindstoreSaver(acme).aput(config, made[1][0], {"step": 2}, {})
    assert commands(log) == ["find", "update"]
    assert (await saver.aget_tuple(config)).checkpoint["channel_values"] == {"n": 2}
