"""`mindstore import --from langgraph postgresql://...`: the graph of the `SqliteSaver`
tests (tool calls, a plain state channel, an interrupt left pending) run on
langgraph-checkpoint-postgres's `PostgresSaver` against a real PostgreSQL server
(tests/postgres_server.py), imported, and read back through `MindstoreSaver` compared
with what `PostgresSaver` returns: every checkpoint tuple, state and history, and an
interrupted thread resumed on both."""

from __future__ import annotations

import asyncio
import os
from typing import Annotated, Any, TypedDict
from uuid import uuid4

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.checkpoint.postgres import PostgresSaver, ShallowPostgresSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command
from typer.testing import CliRunner

import mindstore
from mindstore.errors import ValidationError
from mindstore.imports import UnreadableSource, import_from
from mindstore.imports.langgraph_values import canonical_tuple, unstorable
from mindstore.integrations.langgraph import MindstoreSaver
from mindstore.store import Store
from postgres_server import PROGRAMS, SKIP, PostgresServer, require_programs
from test_import_langgraph import (
    THREADS,
    check_a_crash_then_a_rerun,
    check_a_second_run_writes_nothing,
    check_a_subgraph_thread,
    check_the_interrupted_thread_resumes,
    config,
    graph,
    served,
)
from test_import_support import store_bytes

KIND = "langgraph"


def build_source(url: str) -> None:
    """The SQLite tests' threads: each asks for a hotel; two confirm, one is left at the
    interrupt (its pending write); one asks twice."""
    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
        app = graph(saver)
        for thread, city in THREADS.items():
            app.invoke({"messages": [HumanMessage(f"Find a hotel in {city}")]}, config(thread))
            if thread != "trip-3":
                app.invoke(Command(resume="yes"), config(thread))
        app.invoke({"messages": [HumanMessage("And one in Braga")]}, config("trip-1"))
        app.invoke(Command(resume="no"), config("trip-1"))


def source_view(url: str) -> dict[str, Any]:
    """What PostgresSaver gives for each thread: its tuples, state and history."""
    with PostgresSaver.from_conn_string(url) as saver:
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


@pytest.fixture
def source(postgres_server: PostgresServer, postgres_database: str) -> str:
    url = postgres_server.url(postgres_database)
    build_source(url)
    return url


async def test_every_thread_reads_back_as_postgressaver_returns_it(
    store: Store, source: str, postgres_server: PostgresServer, postgres_database: str
) -> None:
    expected = source_view(source)
    rows = postgres_server.rows(postgres_database)
    receipt = await import_from(store, KIND, source, tenant="acme")
    assert postgres_server.rows(postgres_database) == rows  # read, never written
    assert await served(store, "acme") == expected
    assert expected["trip-1"]["state"]["messages"][-1].content.startswith("Casa Central")
    assert expected["trip-3"]["next"] == ("confirm",)  # interrupted, its write pending
    checkpoints = sum(len(v["tuples"]) for v in expected.values())
    messages = sum(len(v["state"]["messages"]) for v in expected.values())
    assert receipt.read["conversations"] == 3
    assert receipt.read["checkpoints"] == checkpoints == len(rows["checkpoints"])
    assert receipt.read["messages"] == messages == 4 + 4 + 8
    assert receipt.read["writes"] == len(rows["checkpoint_writes"]) > 0
    assert receipt.written == receipt.read
    assert receipt.read_sha256 == receipt.written_sha256


async def test_an_imported_thread_resumes_on_mindstore(store: Store, source: str) -> None:
    def resume() -> Any:
        with PostgresSaver.from_conn_string(source) as saver:
            return graph(saver).invoke(Command(resume="yes"), config("trip-3"))

    await check_the_interrupted_thread_resumes(store, source, resume)


async def test_a_second_run_writes_nothing(store: Store, source: str) -> None:
    await check_a_second_run_writes_nothing(store, source)


async def test_a_crash_at_any_write_then_a_rerun_completes_without_doubles(
    store: Store, source: str
) -> None:
    await check_a_crash_then_a_rerun(store, source, source_view(source))


async def test_dry_run_owner_and_bad_sources(
    store: Store, source: str, postgres_server: PostgresServer
) -> None:
    before = await store_bytes(store)
    receipt = await import_from(store, KIND, source, tenant="acme", dry_run=True)
    assert receipt.written == receipt.read and receipt.written_sha256 is None
    with pytest.raises(ValidationError, match="owner_from"):
        await import_from(store, KIND, source, tenant="acme", owner_from="user_id")
    empty = postgres_server.create_database()
    partial = postgres_server.create_database()
    shallow = postgres_server.create_database()
    try:
        with psycopg.connect(postgres_server.url(partial), autocommit=True) as connection:
            connection.execute("CREATE TABLE checkpoints (thread_id TEXT)")
        with (
            pytest.warns(DeprecationWarning),
            ShallowPostgresSaver.from_conn_string(postgres_server.url(shallow)) as saver,
        ):
            saver.setup()
            graph(saver).invoke({"messages": [HumanMessage("Find a hotel in Faro")]},
                                config("trip-3"))  # fmt: skip
        for bad, reason in [
            (postgres_server.url("no_such_database") + "&password=s3cret", "cannot connect"),
            ("postgresql://ana:s3cret@127.0.0.1:1/db?connect_timeout=2", "cannot connect"),
            (postgres_server.url(empty), "no 'checkpoints' table: not a langgraph store"),
            (postgres_server.url(partial), "table 'checkpoints' lacks checkpoint,"),
            (postgres_server.url(shallow), "lacks checkpoint_id, parent_checkpoint_id"),
            (postgres_server.url(empty) + "&no_such_option=1", "cannot connect"),
        ]:
            with pytest.raises(UnreadableSource, match=reason) as refused:
                await import_from(store, KIND, bad, tenant="acme")
            assert refused.value.source.startswith("postgresql://")
            assert "s3cret" not in str(refused.value)
        # an empty database is refused, never given the saver's tables
        assert postgres_server.rows(empty) == {}
    finally:
        postgres_server.drop_database(empty)
        postgres_server.drop_database(partial)
        postgres_server.drop_database(shallow)
    assert await store_bytes(store) == before
    await import_from(store, KIND, source, tenant="acme", owner="ana")
    assert await served(store, "acme", "ana") == source_view(source)


def test_the_command_imports_a_postgres_url(source: str, tmp_path: Any) -> None:
    """The CLI takes the URL as SOURCE; the receipt hides its password (the test server
    trusts its socket's users, so any password is accepted)."""
    import json

    from mindstore.cli import app

    data = tmp_path / "store.json.gz"
    url = f"{source}&password=s3cret"
    args = ["--data", str(data), "import", "--from", KIND, url, "--tenant", "acme"]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    printed = json.loads(first.stdout)
    assert "s3cret" not in first.output and printed["source"].endswith("&password=***")
    assert printed["read"]["conversations"] == 3 and printed["written"] == printed["read"]
    again = json.loads(CliRunner().invoke(app, args).stdout)
    assert set(again["written"].values()) == {0}


async def test_a_subgraph_thread_imports_with_its_namespace_and_resumes(
    store: Store, postgres_server: PostgresServer, postgres_database: str
) -> None:
    url = postgres_server.url(postgres_database)
    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
        await check_a_subgraph_thread(store, saver, url)


def test_without_postgresql_the_tests_fail_naming_it_unless_told_to_skip(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    monkeypatch.setenv(PROGRAMS, str(tmp_path))  # a folder without the server programs
    monkeypatch.delenv(SKIP, raising=False)
    with pytest.raises(pytest.fail.Exception, match=r"\(initdb, pg_ctl, postgres\) in "
                       + str(tmp_path) + ".*MINDSTORE_SKIP_POSTGRES=1"):  # fmt: skip
        require_programs()
    monkeypatch.setenv(SKIP, "1")
    with pytest.raises(pytest.skip.Exception, match="no PostgreSQL server programs"):
        require_programs()
    monkeypatch.delenv(PROGRAMS)
    assert require_programs().joinpath("initdb").is_file()  # here they are: nothing skips


# -- property: any threads, any text, plain channels JSONB keeps inline ---------------------


class Note(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    note: str
    score: float


def noting(saver: Any) -> Any:
    """One node: an answer echoing the question, a plain string and a float (channels
    `PostgresSaver` keeps inline in its JSONB checkpoint, not as blobs)."""

    def reply(state: Note) -> dict[str, Any]:
        asked = state["messages"][-1].content
        return {"messages": [AIMessage(f"noted: {asked}")], "note": asked, "score": state["score"]}

    builder = StateGraph(Note)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    return builder.compile(checkpointer=saver)


TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
               max_size=12)  # PostgreSQL's text and JSONB hold no NUL  # fmt: skip
IDS = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=16)
SCORES = st.floats(-1e18, 1e18, allow_nan=False)
"""Finite floats within 64-bit integers: JSONB reads a float written with an exponent
back as an integer, and one beyond 64 bits is refused (the test after this one)."""
TURNS = st.lists(st.tuples(TEXT, SCORES), min_size=1, max_size=3)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(threads=st.dictionaries(IDS, TURNS, min_size=1, max_size=3))
def test_any_threads_round_trip(
    postgres_server: PostgresServer, threads: dict[str, list[tuple[str, float]]]
) -> None:
    """Whatever threads a `PostgresSaver` holds (any thread ids LangGraph takes, any text,
    finite floats), importing them gives back through `MindstoreSaver` the tuples
    `PostgresSaver` lists, and a second import writes nothing."""
    name = postgres_server.create_database()
    url = postgres_server.url(name)
    try:
        with PostgresSaver.from_conn_string(url) as saver:
            saver.setup()
            app = noting(saver)
            expected = {}
            for thread, turns in threads.items():
                for text, score in turns:
                    app.invoke({"messages": [HumanMessage(text)], "score": score}, config(thread))
                expected[thread] = [canonical_tuple(t) for t in saver.list(config(thread))]
        asyncio.run(_round_trip(url, expected))
    finally:
        postgres_server.drop_database(name)


async def _round_trip(url: str, expected: dict[str, list[dict[str, Any]]]) -> None:
    uri = os.environ.get("MINDSTORE_TEST_URI") or "embedded"
    store = await mindstore.connect(uri, database=f"import_{uuid4().hex[:12]}")
    try:
        receipt = await import_from(store, KIND, url, tenant="acme")
        saver = MindstoreSaver(store.scoped("acme"))
        got = {thread: [canonical_tuple(t) async for t in saver.alist(config(thread))]
               for thread in expected}  # fmt: skip
        assert got == expected
        assert receipt.read_sha256 == receipt.written_sha256
        assert receipt.read["checkpoints"] == sum(len(v) for v in expected.values())
        again = await import_from(store, KIND, url, tenant="acme")
        assert set(again.written.values()) == {0}
    finally:
        if uri != "embedded":
            await store.backend.client.drop_database(store.database.name)
        await store.close()


def run_noting(url: str, thread: str, score: float, metadata: dict[str, Any]) -> list[Any]:
    """One turn of `noting` on `thread`; the tuples `PostgresSaver` then lists for it."""
    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
        noting(saver).invoke({"messages": [HumanMessage("hi")], "score": score},
                             {**config(thread), "metadata": metadata})  # fmt: skip
        return list(saver.list(config(thread)))


async def test_a_number_jsonb_made_an_integer_beyond_64_bits_is_refused_before_any_write(
    store: Store, postgres_server: PostgresServer, postgres_database: str
) -> None:
    """`PostgresSaver` keeps plain channel values and metadata in JSONB: a float written
    with an exponent reads back as an integer. Within 64 bits it is carried as the saver
    returns it; beyond, LangGraph's serializer cannot store it, and the import refuses
    the source naming the thread and the value, before writing anything (not half-way
    through the thread with a bare TypeError)."""
    url = postgres_server.url(postgres_database)
    carried = run_noting(url, "fine", 1e16, {"n": 2**63 + 5})
    assert carried[0].checkpoint["channel_values"]["score"] == 10**16  # an int, from JSONB
    receipt = await import_from(store, KIND, url, tenant="acme")
    mine = MindstoreSaver(store.scoped("acme"))
    assert [canonical_tuple(t) async for t in mine.alist(config("fine"))] == [
        canonical_tuple(t) for t in carried]  # fmt: skip
    assert receipt.written == receipt.read
    for thread, score, metadata, what in [
        ("big", 2.0**64, {}, "channel 'score'"),
        ("low", -1e19, {}, "channel 'score'"),
        ("meta", 1.0, {"big": 2**64}, r"metadata\['big'\]"),
    ]:
        other = postgres_server.create_database()
        try:
            run_noting(postgres_server.url(other), thread, score, metadata)
            before = await store_bytes(store)
            with pytest.raises(UnreadableSource,
                               match=f"thread '{thread}', checkpoint '.+': {what} holds an "
                               "integer beyond 64 bits"):  # fmt: skip
                await import_from(store, KIND, postgres_server.url(other), tenant="acme")
            assert await store_bytes(store) == before
        finally:
            postgres_server.drop_database(other)


def test_an_integer_beyond_64_bits_is_found_anywhere_in_the_metadata() -> None:
    """Metadata is any JSON a caller `put`: the search goes into lists and objects, and
    stops at the 64-bit bounds msgpack has (signed below, unsigned above)."""
    from langgraph.checkpoint.base import CheckpointTuple, empty_checkpoint

    def found(metadata: Any, value: Any = None) -> str | None:
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"n": value}
        return unstorable(CheckpointTuple(config("t"), checkpoint, metadata))

    assert (
        found({"runs": [1, {"at": 2**64}]})
        == "metadata['runs'][1]['at'] holds an integer beyond 64 bits"
    )
    assert found({"runs": [-(2**63), 2**64 - 1, True, 1.5e300, "2**64"]}, 2**64 - 1) is None
    assert found({}, -(2**63) - 1) == "channel 'n' holds an integer beyond 64 bits"
