"""`mindstore import --from langgraph`: a real `SqliteSaver` file written by running a
graph (tool calls, a plain state channel, an interrupt left pending), read back through
`MindstoreSaver` and compared with what `SqliteSaver` returns: every checkpoint tuple,
and the graph's state and history as LangChain messages."""

from __future__ import annotations

import operator
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, interrupt

from mindstore.errors import ValidationError
from mindstore.imports import UnreadableSource, import_from
from mindstore.imports.langgraph_values import canonical_tuple
from mindstore.integrations.langgraph import MindstoreSaver
from mindstore.store import Store
from test_import_support import crash_then_resume, on_disk, store_bytes

KIND = "langgraph"
THREADS = {"trip-1": "Lisbon", "trip/2": "Porto", "trip-3": "Faro"}


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    bookings: Annotated[list[str], operator.add]
    confirmed: str


def agent(state: State) -> dict[str, Any]:
    last = state["messages"][-1]
    if isinstance(last, HumanMessage):
        city = last.content.split()[-1]
        call = {"name": "search_hotels", "args": {"city": city}, "id": f"call_{city}"}
        return {"messages": [AIMessage("", tool_calls=[call])]}
    return {"messages": [AIMessage(f"Casa Central has rooms: {last.content}.")],
            "bookings": [str(last.content)]}  # fmt: skip


def tools(state: State) -> dict[str, Any]:
    call = state["messages"][-1].tool_calls[0]  # type: ignore[union-attr]
    return {"messages": [ToolMessage(f"142 EUR in {call['args']['city']}",
                                     tool_call_id=call["id"])]}  # fmt: skip


def confirm(state: State) -> dict[str, Any]:
    return {"confirmed": interrupt("book it?")}


def route(state: State) -> str:
    return "tools" if getattr(state["messages"][-1], "tool_calls", None) else "confirm"


def graph(saver: BaseCheckpointSaver[Any]) -> Any:
    builder = StateGraph(State)
    builder.add_node("agent", agent)
    builder.add_node("tools", tools)
    builder.add_node("confirm", confirm)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", "confirm"])
    builder.add_edge("tools", "agent")
    builder.add_edge("confirm", END)
    return builder.compile(checkpointer=saver)


def config(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


def build_source(path: Path) -> None:
    """Three threads: each asks for a hotel; two confirm, one is left at the interrupt
    (its pending write); one asks twice."""
    with sqlite3.connect(path, check_same_thread=False) as connection:
        app = graph(SqliteSaver(connection))
        for thread, city in THREADS.items():
            app.invoke({"messages": [HumanMessage(f"Find a hotel in {city}")]}, config(thread))
            if thread != "trip-3":
                app.invoke(Command(resume="yes"), config(thread))
        app.invoke({"messages": [HumanMessage("And one in Braga")]}, config("trip-1"))
        app.invoke(Command(resume="no"), config("trip-1"))
    connection.close()


def source_view(path: Path) -> dict[str, Any]:
    """What SqliteSaver gives for each thread: its tuples, state and history."""
    connection = sqlite3.connect(path, check_same_thread=False)
    try:
        saver = SqliteSaver(connection)
        app = graph(saver)
        return {
            thread: {
                "tuples": [canonical_tuple(t) for t in saver.list(config(thread))],
                "state": app.get_state(config(thread)).values,
                "next": app.get_state(config(thread)).next,
                "history": [s.values for s in app.get_state_history(config(thread))],
            }
            for thread in THREADS
        }
    finally:
        connection.close()


async def served(store: Store, tenant: str, owner: str | None = None) -> dict[str, Any]:
    saver = MindstoreSaver(store.scoped(tenant, owner))
    app = graph(saver)
    found = {}
    for thread in THREADS:
        state = await app.aget_state(config(thread))
        found[thread] = {
            "tuples": [canonical_tuple(t) async for t in saver.alist(config(thread))],
            "state": state.values,
            "next": state.next,
            "history": [s.values async for s in app.aget_state_history(config(thread))],
        }
    return found


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "graph.db"
    build_source(path)
    return path


async def test_every_thread_reads_back_as_sqlitesaver_returns_it(
    store: Store, source: Path
) -> None:
    expected = source_view(source)
    file = on_disk(source)
    receipt = await import_from(store, KIND, source, tenant="acme")
    assert on_disk(source) == file  # read, never written
    assert await served(store, "acme") == expected
    # as LangChain messages: the latest state of each thread
    assert expected["trip-1"]["state"]["messages"][-1].content.startswith("Casa Central")
    assert expected["trip-3"]["next"] == ("confirm",)  # interrupted, its write pending
    checkpoints = sum(len(v["tuples"]) for v in expected.values())
    messages = sum(len(v["state"]["messages"]) for v in expected.values())
    assert receipt.read["conversations"] == 3
    assert receipt.read["checkpoints"] == checkpoints
    assert receipt.read["messages"] == messages == 4 + 4 + 8
    assert receipt.read["writes"] > 0
    assert receipt.written == receipt.read
    assert receipt.read_sha256 == receipt.written_sha256


async def check_the_interrupted_thread_resumes(
    store: Store, source: Path | str, resume_on_the_source: Callable[[], Any]
) -> None:
    """The interrupted thread goes on where it stopped, on mindstore, as on the source's
    own saver (`resume_on_the_source`, called after the import, resumes it there)."""
    await import_from(store, KIND, source, tenant="acme")
    app = graph(MindstoreSaver(store.scoped("acme")))
    done = await app.ainvoke(Command(resume="yes"), config("trip-3"))
    assert done == resume_on_the_source()
    assert done["confirmed"] == "yes"


async def check_a_second_run_writes_nothing(store: Store, source: Path | str) -> None:
    first = await import_from(store, KIND, source, tenant="acme")
    before = await store_bytes(store)
    second = await import_from(store, KIND, source, tenant="acme")
    assert await store_bytes(store) == before
    assert set(second.written.values()) == {0} and second.unchanged == 3
    assert second.written_sha256 == first.written_sha256 == first.read_sha256


async def check_a_crash_then_a_rerun(
    store: Store, source: Path | str, expected: dict[str, Any]
) -> None:
    """A crash at every 7th write, then a rerun: each completes, nothing doubled."""

    async def run(hook: Any, tenant: str) -> Any:
        return await import_from(store, KIND, source, tenant=tenant, on_step=hook)

    async def check(tenant: str) -> None:
        assert await served(store, tenant) == expected

    writes = await crash_then_resume(run, check, every=7)  # 1, 8, 15, ... and the last
    assert writes > 20


async def test_an_imported_thread_resumes_on_mindstore(store: Store, source: Path) -> None:
    def resume() -> Any:
        with sqlite3.connect(source, check_same_thread=False) as connection:
            done = graph(SqliteSaver(connection)).invoke(Command(resume="yes"), config("trip-3"))
        connection.close()
        return done

    await check_the_interrupted_thread_resumes(store, source, resume)


async def test_a_second_run_writes_nothing(store: Store, source: Path) -> None:
    await check_a_second_run_writes_nothing(store, source)


async def test_a_crash_at_any_write_then_a_rerun_completes_without_doubles(
    store: Store, source: Path
) -> None:
    await check_a_crash_then_a_rerun(store, source, source_view(source))


async def test_dry_run_owner_and_bad_sources(store: Store, source: Path, tmp_path: Path) -> None:
    before = await store_bytes(store)
    receipt = await import_from(store, KIND, source, tenant="acme", dry_run=True)
    assert receipt.written == receipt.read and receipt.written_sha256 is None
    with pytest.raises(ValidationError, match="owner_from"):
        await import_from(store, KIND, source, tenant="acme", owner_from="user_id")
    agents = tmp_path / "agents.db"
    sqlite3.connect(agents).execute("CREATE TABLE agent_sessions (session_id TEXT)").close()
    for bad, reason in [(tmp_path / "none.db", "no such file"),
                        (agents, "no 'checkpoints' table")]:  # fmt: skip
        with pytest.raises(UnreadableSource, match=reason):
            await import_from(store, KIND, bad, tenant="acme")
    assert await store_bytes(store) == before
    await import_from(store, KIND, source, tenant="acme", owner="ana")
    assert await served(store, "acme", "ana") == source_view(source)


# -- MongoDBSaver ------------------------------------------------------------------------


def build_mongo_source(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The same threads run on langgraph-checkpoint-mongodb's `MongoDBSaver` over an
    in-memory MongoDB (mongomock, the embedded backend's engine). `put_writes` is a bulk
    write, and pymongo >= 4.11 passes ``sort=None`` to mongomock's bulk builder, which
    rejects the keyword (the embedded backend's own client works around it; a bare
    mongomock client does not): the builder is given a form that accepts it."""
    import mongomock
    from langgraph.checkpoint.mongodb import MongoDBSaver

    builder = mongomock.collection.BulkOperationBuilder
    add_update = builder.add_update

    def without_sort(self: Any, *args: Any, sort: Any = None, **kwargs: Any) -> Any:
        assert sort is None
        return add_update(self, *args, **kwargs)

    monkeypatch.setattr(builder, "add_update", without_sort)

    client: Any = mongomock.MongoClient()
    app = graph(MongoDBSaver(client, "checkpointing_db"))
    for thread, city in THREADS.items():
        app.invoke({"messages": [HumanMessage(f"Find a hotel in {city}")]}, config(thread))
        if thread != "trip-3":
            app.invoke(Command(resume="yes"), config(thread))
    return client


def mongo_view(client: Any) -> dict[str, Any]:
    from langgraph.checkpoint.mongodb import MongoDBSaver

    saver = MongoDBSaver(client, "checkpointing_db")
    app = graph(saver)
    return {
        thread: {
            "tuples": [canonical_tuple(t) for t in saver.list(config(thread))],
            "state": app.get_state(config(thread)).values,
            "next": app.get_state(config(thread)).next,
            "history": [s.values for s in app.get_state_history(config(thread))],
        }
        for thread in THREADS
    }


async def test_mongodbsaver_threads_read_back_as_mongodbsaver_returns_them(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mindstore.imports import MongoSource

    client = build_mongo_source(monkeypatch)
    expected = mongo_view(client)
    source = MongoSource(client, "checkpointing_db", "checkpoints")
    receipt = await import_from(store, KIND, source, tenant="acme")
    assert await served(store, "acme") == expected
    assert receipt.read["conversations"] == 3 and receipt.written == receipt.read
    assert receipt.read["writes"] > 0
    again = await import_from(store, KIND, source, tenant="acme")
    assert set(again.written.values()) == {0}

    async def run(hook: Any, tenant: str) -> Any:
        return await import_from(store, KIND, source, tenant=tenant, on_step=hook)

    async def check(tenant: str) -> None:
        assert await served(store, tenant) == expected

    assert await crash_then_resume(run, check, every=9) > 20
    with pytest.raises(UnreadableSource, match="no such collection"):
        await import_from(store, KIND, MongoSource(client, "checkpointing_db", "nope"),
                          tenant="other")  # fmt: skip


# -- a subgraph: checkpoints in a namespace of their own ----------------------------------


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def approve(state: Chat) -> dict[str, Any]:
    return {"messages": [AIMessage(f"approved: {interrupt('approve?')}")]}


def with_subgraph(saver: BaseCheckpointSaver[Any]) -> Any:
    inner = StateGraph(Chat)
    inner.add_node("approve", approve)
    inner.add_edge(START, "approve")
    inner.add_edge("approve", END)
    outer = StateGraph(Chat)
    outer.add_node("plan", lambda state: {"messages": [AIMessage("Plan: Lisbon, 3 nights.")]})
    outer.add_node("review", inner.compile())
    outer.add_edge(START, "plan")
    outer.add_edge("plan", "review")
    outer.add_edge("review", END)
    return outer.compile(checkpointer=saver)


def ordered(tuples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tuples by namespace, then id (savers list namespaces in their own order)."""
    return sorted(tuples, key=lambda t: (t["checkpoint_ns"], t["checkpoint_id"]))


async def check_a_subgraph_thread(store: Store, saver: Any, source: str | Path) -> None:
    """Run a graph with a subgraph on `saver` (a source saver, opened) up to its interrupt,
    import `source` (where that saver keeps its data), then check the thread reads back
    with both namespaces and resumes on mindstore as on the source (shared by each
    saver's test)."""
    thread = config("plan-1")
    original = with_subgraph(saver)
    original.invoke({"messages": [HumanMessage("Plan my trip")]}, thread)
    tuples = ordered([canonical_tuple(t) for t in saver.list(thread)])
    state = original.get_state(thread, subgraphs=True)
    receipt = await import_from(store, KIND, source, tenant="acme")
    mine = MindstoreSaver(store.scoped("acme"))
    assert ordered([canonical_tuple(t) async for t in mine.alist(thread)]) == tuples
    assert len({t["checkpoint_ns"] for t in tuples}) == 2  # the root and the subgraph's
    app = with_subgraph(mine)
    imported = await app.aget_state(thread, subgraphs=True)
    assert (imported.values, imported.next) == (state.values, state.next)
    assert [t.state.values for t in imported.tasks] == [t.state.values for t in state.tasks]
    done = await app.ainvoke(Command(resume="yes"), thread)
    again = original.invoke(Command(resume="yes"), thread)
    # the same run (the new message's id is a fresh uuid on each side)
    assert [(m.type, m.content) for m in done["messages"]] == [
        (m.type, m.content) for m in again["messages"]]  # fmt: skip
    assert done["messages"][:-1] == again["messages"][:-1]
    assert done["messages"][-1].content == "approved: yes"
    assert receipt.written == receipt.read and receipt.read["checkpoints"] == len(tuples)


async def test_a_subgraph_thread_imports_with_its_namespace_and_resumes(
    store: Store, tmp_path: Path
) -> None:
    path = tmp_path / "sub.db"
    with sqlite3.connect(path, check_same_thread=False) as connection:
        await check_a_subgraph_thread(store, SqliteSaver(connection), path)
    connection.close()
