"""One store used from several event loops and threads at once.

This is the documented sync path of the integrations: a sync call with no loop running
runs its coroutine in a loop of its own (`asyncio.run`), so threads that share one store
and one conversation write it from as many loops. Nothing bound to one loop may be shared
between them (the per-task locks, the live feed's wake-ups), store-wide state (the header
cache, the embedded backend) must survive threads, and concurrent writers must lose
nothing and never hang: every thread is joined with a deadline, so a deadlock fails the
test instead of hanging the run.

A MongoDB client is bound to the event loop it was first used on (docs/integrations.md,
"Sync methods and threads"), so the cross-loop tests need the embedded backend; on a server
(`MINDSTORE_TEST_URI`) they are skipped.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any
from urllib.parse import quote

import pytest

from mindstore.model.parts import TaskConfigPart
from mindstore.repositories.header_cache import CachedHeader, HeaderCache
from mindstore.repositories.locks import TaskLocks
from mindstore.store import Store

CONFIG = TaskConfigPart(model_name="m")
THREADS = 8
APPENDS = 3
ROUNDS = 20
"""Rounds of the integration tests: before the loop-safe locks, 4 threads x 3 appends
failed about 8 rounds in 20 (a lock bound to another loop, or a thread that never
returned); 8 threads fail nearly every round."""
DEADLINE = 30.0
"""Seconds all the threads of one round may take: far above what they need (well under a
second), so only a hang reaches it."""


@pytest.fixture(autouse=True)
def frequent_thread_switches() -> Iterator[None]:
    """Let the interpreter switch threads often, so that unguarded state interleaves."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def cross_loop(store: Store) -> None:
    if store.kind != "embedded":
        pytest.skip("a MongoDB client is bound to the event loop it was first used on")


def run_threads(work: Callable[[int], None], count: int = THREADS) -> None:
    """`work(0)` ... `work(count - 1)`, each in a thread of its own, started together.

    Raises the first error of a thread; fails if a thread has not returned by the deadline
    (a deadlock), leaving it behind as a daemon."""
    barrier = threading.Barrier(count)
    errors: list[BaseException] = []

    def main(n: int) -> None:
        try:
            barrier.wait(DEADLINE)
            work(n)
        except BaseException as error:  # handed to the test below
            errors.append(error)

    threads = [threading.Thread(target=main, args=(n,), name=f"writer-{n}", daemon=True)
               for n in range(count)]  # fmt: skip
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + DEADLINE
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    hung = [thread.name for thread in threads if thread.is_alive()]
    assert not hung, f"threads that never returned: {hung}"
    if errors:
        raise errors[0]


def assert_each_once_in_thread_order(stored: Sequence[str], count: int = THREADS,
                                     appends: int = APPENDS) -> None:  # fmt: skip
    """`stored` holds "<thread>.<i>" for every thread and append exactly once, and each
    thread's in the order it wrote them."""
    expected = [f"{n}.{i}" for n in range(count) for i in range(appends)]
    assert sorted(stored) == sorted(expected)
    for n in range(count):
        assert [s for s in stored if s.split(".")[0] == str(n)] == [
            f"{n}.{i}" for i in range(appends)
        ]


# ---------------------------------------------------------------------- integrations
async def test_a_sync_langchain_history_written_from_many_threads_keeps_every_message(store):
    pytest.importorskip("langchain_core")
    from langchain_core.messages import HumanMessage

    from mindstore.integrations.langchain import MindstoreChatMessageHistory

    cross_loop(store)
    acme = store.scoped("acme")
    for round_ in range(ROUNDS):
        # built with no loop running, as in a sync program: every call runs in a new loop
        history = await asyncio.to_thread(MindstoreChatMessageHistory, f"chat-{round_}", acme)
        seen: dict[int, list[str]] = {}

        def work(n: int, history: Any = history, seen: dict[int, list[str]] = seen) -> None:
            for i in range(APPENDS):
                history.add_messages([HumanMessage(content=f"{n}.{i}")])
            seen[n] = [str(m.content) for m in history.messages]

        await asyncio.to_thread(run_threads, work)
        stored = [str(m.content) for m in await history.aget_messages()]
        assert_each_once_in_thread_order(stored)
        for n, read in seen.items():  # a thread's read after its writes holds them all
            mine = [s for s in read if s.startswith(f"{n}.")]
            assert mine == [f"{n}.{i}" for i in range(APPENDS)]


async def test_a_sync_agents_session_written_from_many_threads_keeps_every_item(store):
    pytest.importorskip("agents")
    from mindstore.integrations.openai_agents import MindstoreSession

    cross_loop(store)
    acme = store.scoped("acme")
    for round_ in range(ROUNDS):
        session = MindstoreSession(f"session-{round_}", acme)

        def work(n: int, session: MindstoreSession = session) -> None:
            for i in range(APPENDS):  # how a sync program calls the async protocol
                asyncio.run(session.add_items([{"role": "user", "content": f"{n}.{i}"}]))

        await asyncio.to_thread(run_threads, work)
        items = await session.get_items()
        assert_each_once_in_thread_order([item["content"] for item in items])


async def test_agents_run_sync_from_many_threads_on_one_session(store):
    """`Runner.run_sync` (the SDK's sync entry point: a default loop per thread)."""
    pytest.importorskip("agents")
    from agents import Agent, RunConfig, Runner
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import ResponseOutputMessage, ResponseOutputText

    from mindstore.integrations.openai_agents import MindstoreSession

    class Echo(Model):
        """Answers "re <the last user message>"."""

        async def get_response(self, system_instructions: Any, input: Any, *args: Any,
                               **kwargs: Any) -> ModelResponse:  # fmt: skip
            last = [item for item in input if item.get("role") == "user"][-1]["content"]
            reply = ResponseOutputMessage(
                id=f"msg_{last}", type="message", role="assistant", status="completed",
                content=[ResponseOutputText(type="output_text", text=f"re {last}", annotations=[])],
            )  # fmt: skip
            return ModelResponse(output=[reply], usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover
            raise NotImplementedError

    cross_loop(store)
    acme = store.scoped("acme")
    config = RunConfig(tracing_disabled=True)
    for round_ in range(ROUNDS // 4):
        session = MindstoreSession(f"run-{round_}", acme)
        agent = Agent(name="echo", instructions="Echo.", model=Echo())

        def work(n: int, session: MindstoreSession = session, agent: Agent[Any] = agent) -> None:
            try:
                for i in range(APPENDS):
                    result = Runner.run_sync(agent, f"{n}.{i}", session=session, run_config=config)
                    assert result.final_output == f"re {n}.{i}"
            finally:  # run_sync leaves the thread's default loop open on purpose
                asyncio.get_event_loop_policy().get_event_loop().close()

        await asyncio.to_thread(run_threads, work)
        items = await session.get_items()
        said = [item["content"] for item in items if item.get("role") == "user"]
        assert_each_once_in_thread_order(said)
        replies = [item["content"][0]["text"] for item in items if item.get("role") == "assistant"]
        assert sorted(replies) == sorted(f"re {s}" for s in said)
        for position, item in enumerate(items):  # every answer follows its question
            if item.get("role") == "assistant":
                question = item["content"][0]["text"].removeprefix("re ")
                assert question in said and said.index(question) <= position


# ---------------------------------------------------------------------- the store's verbs
async def test_store_verbs_from_threads_each_running_its_own_loop(store):
    cross_loop(store)
    acme = store.scoped("acme")
    shared = (await acme.tasks.create(task_id="shared", owner="ann")).id
    appends = APPENDS * 2
    own: dict[int, str] = {}

    async def write(n: int) -> None:
        mine = await acme.tasks.create(owner="ann", title=f"thread {n}", config=CONFIG)
        own[n] = mine.id
        for i in range(appends):
            await acme.tasks.add_human_message(shared, f"{n}.{i}", message_id=f"u-{n}-{i}")
            reply = await acme.tasks.add_assistant_message(mine.id, message_id=f"a-{n}-{i}")
            await acme.tasks.add_text_part(mine.id, reply.id, f"answer {n}.{i}")

    async def replay(n: int) -> None:
        for i in range(appends):
            again = await acme.tasks.add_human_message(shared, f"{n}.{i}", message_id=f"u-{n}-{i}")
            assert again is not None and again.id == f"u-{n}-{i}"

    def work(n: int) -> None:
        asyncio.run(write(n))
        asyncio.run(replay(n))  # the same appends from another loop: replays, nothing stored

    await asyncio.to_thread(run_threads, work)
    messages = await acme.tasks.messages(shared)
    assert_each_once_in_thread_order([m.text() for m in messages], appends=appends)
    record = await acme.tasks.get(shared)
    assert record.seq == THREADS * appends == len(messages)
    for n, task_id in own.items():
        replies = await acme.tasks.messages(task_id)
        assert [m.id for m in replies][1:] == [f"a-{n}-{i}" for i in range(appends)]
        texts = [m.text() for m in replies[1:]]  # after the config message
        assert texts == [f"answer {n}.{i}" for i in range(appends)]
    # the header cache is still only a guess after all that: one more write on this loop
    await acme.tasks.add_human_message(shared, "last", message_id="last")
    assert (await acme.tasks.get(shared)).seq == record.seq + 1


async def test_the_feed_wakes_a_watcher_on_another_loop(store):
    """A write on one loop wakes a watcher waiting on another loop in another thread (no
    heartbeat: only the in-process notification can wake it)."""
    cross_loop(store)
    acme = store.scoped("acme")
    task = (await acme.tasks.create()).id
    await acme.tasks.add_human_message(task, "m0", message_id="m0")
    watching = threading.Event()
    seen: list[str] = []

    async def watch() -> None:
        async for event in acme.tasks.watch(task):
            watching.set()  # subscribed, and the first read is done
            if event.kind == "new":
                seen.append(event.message.id)
            if len(seen) == 3:
                return

    async def write() -> None:
        for n in (1, 2):
            await asyncio.sleep(0.05)  # the watcher's loop sleeps, waiting for a wake-up
            await acme.tasks.add_human_message(task, f"m{n}", message_id=f"m{n}")

    def work(n: int) -> None:
        if n == 0:
            asyncio.run(watch())
        else:
            assert watching.wait(DEADLINE)
            asyncio.run(write())

    await asyncio.to_thread(run_threads, work, 2)
    assert seen == ["m0", "m1", "m2"]


# ---------------------------------------------------------------------- the header cache
def test_the_header_cache_keeps_its_accounts_under_threads():
    from mindstore.model.header import TaskHeader

    cache = HeaderCache(capacity=16, tail_budget=4_000)
    header = TaskHeader()
    stamp = __import__("datetime").datetime(2024, 1, 1)

    def work(n: int) -> None:
        for i in range(3_000):
            key = ("acme", f"t{(n * 7 + i) % 40}")
            entry = CachedHeader(i, stamp, header, {"i": i}, 100 + i % 300)
            if i % 3 == 0:
                cache.forget(key)
            elif i % 3 == 1:
                cache.put(key, entry)
            else:
                cache.get(key)

    run_threads(work)
    entries = [e for e in (cache.get(("acme", f"t{k}")) for k in range(40)) if e is not None]
    assert len(entries) == len(cache) <= 16
    assert cache.tail_bytes == sum(entry.tail_bytes for entry in entries) <= 4_000


# ---------------------------------------------------------------------- the lock maps
def test_each_loop_has_its_own_lock_for_a_task_and_a_finished_loop_leaves_none():
    locks = TaskLocks()

    async def held() -> tuple[asyncio.Lock, asyncio.Lock, asyncio.Lock]:
        first, again = locks.lock(("acme", "t")), locks.lock(("acme", "t"))
        return first, again, locks.lock(("acme", "u"))

    async def in_two_loops() -> None:
        first, again, other = await held()
        assert first is again and first is not other  # one queue per task in a loop
        assert len(locks) == 2
        elsewhere = await asyncio.to_thread(asyncio.run, held())
        assert elsewhere[0] is not first  # another loop: another lock
        del elsewhere

    asyncio.run(in_two_loops())
    gc.collect()
    assert len(locks) == 0 and len(locks._loops) == 0


# ---------------------------------------------------------------------- a server client
def test_a_server_client_used_from_a_second_loop_fails_saying_what_to_do(tmp_path):
    """A sync call with no loop running runs in a new loop; a MongoDB client is bound to
    the first (no server needed: the client binds itself before it connects)."""
    pytest.importorskip("langchain_core")
    from langchain_core.messages import HumanMessage
    from pymongo import AsyncMongoClient
    from pymongo.errors import ServerSelectionTimeoutError

    from mindstore.backends.connection import Backend
    from mindstore.integrations.langchain import MindstoreChatMessageHistory

    nothing = quote(str(tmp_path / "nothing.sock"), safe="")  # no server, no TCP socket
    uri = f"mongodb://{nothing}/?serverSelectionTimeoutMS=50"
    client: AsyncMongoClient[Any] = AsyncMongoClient(uri, connect=False)

    async def first_use() -> None:  # binds the client to this loop (nothing listens there)
        with pytest.raises(ServerSelectionTimeoutError):
            await client.admin.command("ping")
        await client.close()

    asyncio.run(first_use())
    store = Store(Backend(client, client["mindstore_test"], "mongodb"))
    history = MindstoreChatMessageHistory("trip", store.scoped("acme"))
    with pytest.raises(RuntimeError, match=r"add_messages: the store's client is bound .* "
                                           r"docs/integrations.md") as raised:  # fmt: skip
        history.add_messages([HumanMessage(content="hi")])
    assert "different event loop" in str(raised.value.__cause__)


def test_the_documented_recipe_for_threads_runs():
    """docs/integrations.md, "Sync methods and threads": its example, as it is."""
    pytest.importorskip("langchain_core")
    from test_integrations_docs import example

    section = "Sync methods and threads"
    code = compile(example(section), f"docs/integrations.md ({section})", "exec")
    exec(code, {"__name__": "__main__"})  # the documented example itself
