"""Paged message storage: seals, reads over pages, changes to sealed messages, crashes.

Small pages (a few messages, a few KiB) make every path run in a test-sized history; each
test compares what the store returns with what was written, and with an unpaged store run
through the same verbs.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import mindstore
from conftest import StoreFactory
from interleaving import WRITES, hooked
from mindstore import PagePolicy, Store
from mindstore.errors import MindstoreError, TaskTooLarge, ValidationError
from mindstore.ids import task_key
from mindstore.model.header import TaskHeader
from mindstore.model.messages import UserMessage, message_to_dict
from mindstore.model.paging import cut_pages, should_seal
from mindstore.model.parts import TaskConfigPart, TextPart, ToolCallPart, ToolMetadata
from mindstore.model.storage_form import bson_size
from mindstore.repositories.tasks import TaskRepository
from paging_fixtures import crash, every_read, half_done_seal, unfolded

SMALL = PagePolicy(page_messages=4, page_bytes=4096)
CONFIG = TaskConfigPart(
    model_name="m",
    tool_metadata=[ToolMetadata(name="search"), ToolMetadata(name="delegate", is_task_entry=True)],
)
SUB = TaskConfigPart(model_name="sub", tool_metadata=[ToolMetadata(name="search")])


@contextmanager
def frozen_world() -> Iterator[None]:
    """Generated ids and the clock made the same for two runs of the same verbs."""
    counter = itertools.count()
    with (
        mock.patch("mindstore.model.base.ID_SOURCE", lambda: f"id{next(counter)}"),
        mock.patch("mindstore.model.base.CLOCK", lambda: 1_700_000_000.25),
    ):
        yield


@pytest.fixture
def paged(stores: StoreFactory) -> Store:
    return stores.sibling(page_policy=SMALL)


async def raw_task(store: Store, tid: str, tenant: str = "acme") -> dict[str, Any]:
    document = await store.database["tasks"].find_one({"_id": task_key(tenant, tid)})
    assert document is not None
    return document


async def raw_pages(store: Store, tid: str, tenant: str = "acme") -> list[dict[str, Any]]:
    pages = await store.database["task_pages"].find({"task": task_key(tenant, tid)}).to_list(None)
    return sorted(pages, key=lambda page: page["page"])


async def dump(store: Store) -> dict[str, list[Any]]:
    """Every stored document of the task collections, for byte-identical comparisons."""
    out = {}
    for name in ("tasks", "task_pages", "payloads"):
        out[name] = sorted(
            (await store.database[name].find({}).to_list(None)), key=lambda d: str(d["_id"])
        )
    return out


def ids(messages: list[Any]) -> list[str]:
    return [message.id for message in messages]


async def grow(repo: Any, tid: str, count: int, prefix: str = "h") -> list[str]:
    for i in range(count):
        await repo.add_human_message(tid, f"{prefix}{i} " + "x" * 40, message_id=f"{prefix}{i}")
    return [f"{prefix}{i}" for i in range(count)]


# ---------------------------------------------------------------------- pure planning
@given(
    sizes=st.lists(st.integers(1, 5000), min_size=1, max_size=60),
    messages=st.integers(1, 8),
    limit=st.integers(100, 6000),
    force=st.booleans(),
)
def test_cut_pages_is_contiguous_within_limits_and_keeps_the_tail(
    sizes: list[int], messages: int, limit: int, force: bool
) -> None:
    policy = PagePolicy(page_messages=messages, page_bytes=limit)
    cuts = cut_pages(sizes, first_index=10, first_page=3, policy=policy, force=force)
    assert cut_pages(sizes, first_index=10, first_page=3, policy=policy, force=force) == cuts
    position = 10
    for number, cut in enumerate(cuts, start=3):
        assert (cut.page, cut.start) == (number, position)
        assert cut.end > cut.start and cut.size_bytes == sum(sizes[cut.start - 10 : cut.end - 10])
        if cut.end - cut.start > 1:  # only a single message may be larger than a page
            assert cut.end - cut.start <= messages and cut.size_bytes <= limit
        position = cut.end
    assert position - 10 <= len(sizes) - 1  # the last message always stays open
    if force:
        assert position - 10 == max(len(sizes) - 1, 0)
    # a page's range depends only on the messages from its start: a longer open page
    # (more messages appended meanwhile) cuts the same full pages first
    if not force:
        longer = cut_pages([*sizes, *sizes], first_index=10, first_page=3, policy=policy)
        assert longer[: len(cuts)] == cuts


def test_a_bad_page_policy_is_refused_with_its_name() -> None:
    for kwargs, name in (({"page_messages": 0}, "page_messages"),
                         ({"page_bytes": -1}, "page_bytes"),
                         ({"page_messages": True}, "page_messages"),
                         ({"page_bytes": 1.5}, "page_bytes")):  # fmt: skip
        with pytest.raises(ValidationError, match=name):
            PagePolicy(**kwargs)


def test_a_seal_is_due_at_twice_a_page() -> None:
    header = TaskHeader(seq=7, size_bytes=700)
    assert not should_seal(header, SMALL)
    assert should_seal(header.model_copy(update={"seq": 8}), SMALL)
    assert should_seal(header.model_copy(update={"size_bytes": 8192}), SMALL)
    assert not should_seal(header.model_copy(update={"seq": 8}), None)


# ---------------------------------------------------------------------- writes and reads
async def test_appends_seal_pages_and_every_read_sees_each_message_once(paged: Store) -> None:
    acme = paged.scoped("acme").tasks
    tid = (await acme.create(config=CONFIG)).id
    written = [(await acme.messages(tid))[0].id, *await grow(acme, tid, 40)]
    document, pages = await raw_task(paged, tid), await raw_pages(paged, tid)
    assert document["pages"] == len(pages) >= 5
    assert len(document["messages"]) < 2 * SMALL.page_messages  # bounded open page
    assert document["sealed"] + len(document["messages"]) == document["seq"] == 41
    assert [p["start"] for p in pages[1:]] == [p["end"] for p in pages[:-1]]
    assert pages[-1]["end"] == document["sealed"]
    assert document["sealed_bytes"] == sum(p["size_bytes"] for p in pages)
    assert ids(await acme.messages(tid)) == written
    for count in (1, 3, 8, 20, 41, 100):
        assert ids(await acme.tail(tid, count)) == written[-count:]
    for start, limit in ((0, 1), (2, 7), (5, 30), (39, 5), (41, 2)):
        assert ids(await acme.messages(tid, start, limit)) == written[start : start + limit]
    assert (await acme.get_message(tid, "h3")).id == "h3"  # type: ignore[union-attr]
    assert await acme.get_message(tid, "nope") is None
    assert ids(await acme.get_updates(tid, "h5")) == written[7:]
    count, head, tail = await acme.ends(tid, 6, 9)
    assert (count, ids(head), ids(tail)) == (41, written[:6], written[-9:])
    record = await acme.get(tid)
    assert record.seq == 41


async def test_any_range_of_a_paged_task_is_the_slice_of_its_history(paged: Store) -> None:
    """Every range of a 27-message history (sealed pages and the open page), read by
    the writer (its header cache knows the mark) and by another process (it guesses)."""
    repo = paged.scoped("acme").tasks
    tid = (await repo.create()).id
    written = await grow(repo, tid, 27)
    assert (await raw_task(paged, tid))["pages"] >= 5
    cold = Store(paged.backend, page_policy=SMALL).scoped("acme").tasks  # another process
    for start in range(30):
        for stop in (None, *range(start, 32)):
            for reader in (repo, cold):
                assert ids(await reader.read_range(tid, start, stop)) == written[start:stop]


async def test_a_paged_task_reads_like_the_same_task_unpaged(stores: StoreFactory) -> None:
    """The same verbs (calls, answers, sub-tasks, part verbs, finishing) on a paged and an
    unpaged store: every read agrees."""
    both = [await stores.fresh(page_policy=policy) for policy in (SMALL, None)]
    results = []
    for store in both:
        frozen = frozen_world()
        frozen.__enter__()
        repo = store.scoped("acme").tasks
        tid = (await repo.create(task_id="T", config=CONFIG)).id
        await repo.add_human_message(tid, "start", message_id="u0")
        first = await repo.add_assistant_message(tid, message_id="a0")
        await repo.add_tool_call_part(
            tid, first.id, ToolCallPart(tool_call_id="c0", tool_name="search", args={})
        )
        await grow(repo, tid, 12, "p")
        await repo.add_text_part(tid, first.id, " (late)")  # a part verb on a sealed message
        await repo.answer_tool_call(tid, "c0", {"hits": 3}, message_id="r0")  # sealed call
        delegate = await repo.add_assistant_message(tid, message_id="a1")
        await repo.add_tool_call_part(
            tid, delegate.id, ToolCallPart(tool_call_id="d0", tool_name="delegate", args={})
        )
        await repo.add_task_entry(tid, [TextPart(text="sub")], SUB, "e0")
        await grow(repo, tid, 10, "s")
        await repo.add_task_exit(tid, [TextPart(text="done")], "task_result", None, "x0", "xr0")
        await grow(repo, tid, 5, "q")
        await repo.finish_assistant_message(tid, first.id, tokens_in=5, tokens_out=2)
        header = await repo.header(tid)
        results.append({
            "messages": [message_to_dict(m) for m in await repo.messages(tid)],
            "level": ids(await repo.level_messages(tid, "e0")),
            "current": ids(await repo.current_task_messages(tid)),
            "spans": await repo.sub_task_spans(tid),
            "bounds": await repo.task_boundaries(tid, "e0"),
            "first": message_to_dict(await repo.get_message(tid, first.id)),
            "usage": header.usage, "seq": header.seq, "size": header.size_bytes,
            "open": [c.id for c in header.open_tool_calls],
            "context": ids((await repo.context_source(tid))[2]),
        })  # fmt: skip
        frozen.__exit__(None, None, None)
    paged_store = both[0]
    assert (await raw_task(paged_store, "T"))["pages"] > 3
    assert results[0] == results[1]
    assert not (await raw_task(paged_store, "T")).get("pending")  # folded after each write


async def test_context_window_of_a_paged_task_equals_the_unpaged_one(
    stores: StoreFactory,
) -> None:
    windows = []
    for policy in (SMALL, None):
        frozen = frozen_world()
        frozen.__enter__()
        store = await stores.fresh(page_policy=policy)
        acme = store.scoped("acme")
        tid = (await acme.tasks.create(task_id="T", config=CONFIG)).id
        for i in range(15):
            await acme.tasks.add_human_message(tid, f"question {i}", message_id=f"u{i}")
            reply = await acme.tasks.add_assistant_message(tid, message_id=f"a{i}")
            await acme.tasks.add_text_part(tid, reply.id, f"answer {i}")
        window = await acme.tasks.context(tid, auto_compress=False)
        windows.append([message_to_dict(m) for m in window])
        frozen.__exit__(None, None, None)
    assert windows[0] == windows[1] and len(windows[0]) >= 30


# ---------------------------------------------------------------------- crashes during a seal
@pytest.mark.parametrize("step", ["first page", "second page", "task update"])
async def test_a_seal_cut_short_at_any_step_loses_nothing_and_the_next_write_repairs(
    stores: StoreFactory, step: str
) -> None:
    store = stores.sibling(page_policy=None)
    repo = store.scoped("acme").tasks
    tid = (await repo.create()).id
    written = await grow(repo, tid, 12)  # written unpaged: the first seal cuts three pages
    repo.page_policy = SMALL
    skip = {"first page": 0, "second page": 1, "task update": 3}[step]
    page_writes = hooked(repo.port.scope, "pages", WRITES, crash if step != "task update" else None,
                         skip=skip)  # fmt: skip
    # the task update after the three page writes is the seal's (the append's came before)
    task_writes = hooked(repo.port.scope, "tasks", WRITES, crash if step == "task update" else None,
                         skip=1)  # fmt: skip
    with page_writes as wrote, task_writes:
        # the append itself lands; the seal after it fails part-way (the verb still returns)
        await repo.add_human_message(tid, "thirteen", message_id="h12")
    written.append("h12")
    assert len(wrote.calls) == skip + (step != "task update")
    assert (await raw_task(store, tid)).get("pages", 0) == 0  # nothing sealed yet
    assert ids(await repo.messages(tid)) == written  # every message, once
    assert ids(await repo.tail(tid, 8)) == written[-8:]
    assert len(await raw_pages(store, tid)) == {"first page": 0, "second page": 1}.get(step, 3)
    # the next write repairs: it seals, over whatever pages the crash left behind
    await repo.add_human_message(tid, "fourteen", message_id="h13")
    written.append("h13")
    document = await raw_task(store, tid)
    assert document["pages"] >= 3
    assert ids(await repo.messages(tid)) == written
    assert ids(await repo.read_range(tid, 0, document["sealed"])) == written[: document["sealed"]]


async def test_pages_past_the_mark_are_invisible_to_every_read(paged: Store) -> None:
    """A seal stopped after writing its pages (its task update lost) leaves pages past
    the task's mark, holding messages of the open page: no read sees them."""
    acme = paged.scoped("acme").tasks
    tid = await _conversation(paged)
    before = await every_read(acme, tid)
    left = await half_done_seal(paged, SMALL, task_key("acme", tid))
    document = await raw_task(paged, tid)
    assert left and all(page["page"] >= document["pages"] for page in left)
    assert {m["id"] for page in left for m in page["messages"]} & {
        m["id"] for m in document["messages"]
    }  # the open page's messages, twice in the database
    assert await every_read(acme, tid) == before


# ---------------------------------------------------------------------- sealed messages change
async def test_answering_a_sealed_call_is_exactly_once_and_survives_a_failed_fold(
    paged: Store,
) -> None:
    store = paged
    repo = store.scoped("acme").tasks
    tid = (await repo.create(config=CONFIG)).id
    asked = await repo.add_assistant_message(tid, message_id="a0")
    await repo.add_tool_call_part(
        tid, asked.id, ToolCallPart(tool_call_id="c0", tool_name="search", args={})
    )
    await grow(repo, tid, 12)
    assert (await raw_task(store, tid))["sealed"] > 2  # the call is in a sealed page
    with unfolded(repo) as folds:  # every page write fails: the change stays pending
        result = await repo.answer_tool_call(tid, "c0", {"n": 1}, message_id="r0")
        document = await raw_task(store, tid)
        assert [entry["id"] for entry in document["pending"]] == ["a0", "a0"]  # unfolded
        stored = await repo.get_message(tid, "a0")
        call = stored.content[0]  # type: ignore[union-attr]
        assert call.is_loading is False and call.is_approval_pending is False  # applied
        again = await repo.answer_tool_call(tid, "c0", {"n": 1}, message_id="r0")  # a replay
        assert again.id == result.id == "r0"
        assert ids(await repo.messages(tid)).count("r0") == 1
    assert folds.fired >= 1
    await repo.add_human_message(tid, "next", message_id="n0")  # the next write folds
    document = await raw_task(store, tid)
    assert not document.get("pending")
    page = next(p for p in await raw_pages(store, tid) if p["start"] <= 1 < p["end"])
    folded = page["messages"][1 - page["start"]]
    assert folded["id"] == "a0" and folded["content"][0]["is_loading"] is False
    assert page["size_bytes"] == sum(bson_size(m) for m in page["messages"])


async def test_redacting_a_sealed_message_keeps_sizes_exact(paged: Store) -> None:
    acme = paged.scoped("acme").tasks
    tid = (await acme.create()).id
    written = await grow(acme, tid, 14)
    await acme.redact(tid, "h1", reason="pii")
    message = await acme.get_message(tid, "h1")
    assert message is not None and "x" * 40 not in str(message_to_dict(message))
    document, pages = await raw_task(paged, tid), await raw_pages(paged, tid)
    assert not document.get("pending")
    assert document["sealed_bytes"] == sum(p["size_bytes"] for p in pages)
    stored = [m for p in pages for m in p["messages"]] + document["messages"]
    assert document["size_bytes"] == sum(bson_size(m) for m in stored)
    assert ids(await acme.messages(tid)) == written


async def test_concurrent_writers_on_a_paged_task_lose_nothing(paged: Store) -> None:
    """Writers in separate 'processes' (own header caches and locks) append and answer
    sealed calls at once: every message once, each writer's order kept, every call
    answered exactly once, sizes exact."""
    base = paged
    views = [TaskRepository(base.database, "acme", page_policy=SMALL) for _ in range(6)]
    tid = (await views[0].create(config=CONFIG)).id
    for n in range(4):
        asked = await views[0].add_assistant_message(tid, message_id=f"a{n}")
        await views[0].add_tool_call_part(
            tid, asked.id, ToolCallPart(tool_call_id=f"c{n}", tool_name="search", args={})
        )
    await grow(views[0], tid, 10)

    async def appender(n: int) -> None:
        for i in range(12):
            await views[n].add_human_message(tid, f"w{n}-{i}", message_id=f"w{n}-{i}")

    async def answerer(n: int) -> None:
        await views[n].answer_tool_call(tid, f"c{n}", {"n": n}, message_id=f"r{n}")

    await asyncio.gather(*(appender(n) for n in range(6)), *(answerer(n) for n in range(4)))
    messages = await views[0].messages(tid)
    got = ids(messages)
    assert (
        len(got) == len(set(got)) == 1 + 4 + 10 + 72 + 4
    )  # config, callers, fillers, appends, answers
    for n in range(6):
        assert [i for i in got if i.startswith(f"w{n}-")] == [f"w{n}-{i}" for i in range(12)]
    calls = [p for m in messages for p in getattr(m, "content", []) if isinstance(p, ToolCallPart)]
    assert len(calls) == 4 and all(p.is_loading is False for p in calls)
    document, pages = await raw_task(base, tid), await raw_pages(base, tid)
    assert not document.get("pending")
    visible = [p for p in pages if p["page"] < document["pages"]]
    stored = [m for p in visible for m in p["messages"]] + document["messages"]
    assert [m["id"] for m in stored] == got
    assert document["size_bytes"] == sum(bson_size(m) for m in stored)
    assert (await views[0].header(tid)).open_tool_calls == []


# ---------------------------------------------------------------------- limits, old tasks
async def test_a_conversation_grows_past_16_mib_and_only_a_single_huge_value_is_refused(
    stores: StoreFactory,
) -> None:
    store = stores.sibling(page_policy=PagePolicy(8, 1024 * 1024))
    repo = TaskRepository(store.database, "acme", offload_threshold=10**9,
                          max_document_bytes=2 * 1024 * 1024,
                          page_policy=PagePolicy(8, 512 * 1024))  # fmt: skip
    tid = (await repo.create()).id
    for i in range(12):  # 3.6 MB in all, past this repository's 2 MiB document limit
        await repo.add_human_message(tid, str(i) * 300_000, message_id=f"big{i}")
    assert [m.id for m in await repo.messages(tid)] == [f"big{i}" for i in range(12)]
    before = await dump(store)
    with pytest.raises(TaskTooLarge):
        await repo.add_human_message(tid, "z" * (2 * 1024 * 1024), message_id="huge")
    assert await dump(store) == before


async def test_an_unpaged_task_written_before_is_paged_on_its_next_write(
    stores: StoreFactory,
) -> None:
    store = stores.sibling(page_policy=None)
    old = store.scoped("acme").tasks
    tid = (await old.create()).id
    written = await grow(old, tid, 30)
    document = await raw_task(store, tid)
    assert "sealed" not in document and len(document["messages"]) == 30
    store.page_policy = SMALL
    new = store.scoped("acme").tasks
    assert ids(await new.messages(tid)) == written  # reads as it is
    await new.add_human_message(tid, "now paged", message_id="late")
    document = await raw_task(store, tid)
    assert document["pages"] >= 5 and len(document["messages"]) <= SMALL.page_messages
    assert ids(await new.messages(tid)) == [*written, "late"]


async def test_delete_removes_pages_and_a_namesake_overwrites_leftovers(paged: Store) -> None:
    acme = paged.scoped("acme").tasks
    tid = (await acme.create(task_id="same")).id
    await grow(acme, tid, 20)
    leftover = await raw_pages(paged, tid)
    assert leftover
    await acme.delete(tid)
    assert await raw_pages(paged, tid) == []
    # a crash between the task's delete and its pages' delete leaves pages behind
    await paged.database["task_pages"].insert_many(leftover)
    tid = (await acme.create(task_id="same")).id
    # one write: the new task's seal is at version 1, below the leftovers' versions, so only
    # `born` tells the leftovers from pages of its own
    batch = [UserMessage(id=f"n{i}", content=[TextPart(text=f"n{i} " + "x" * 40)])
             for i in range(20)]  # fmt: skip
    await acme.add_messages(tid, batch)
    assert min(p["version"] for p in leftover) > 1
    written = [message.id for message in batch]
    assert ids(await acme.messages(tid)) == written
    document = await raw_task(paged, tid)
    visible = [p for p in await raw_pages(paged, tid) if p["page"] < document["pages"]]
    assert len(visible) >= 3 and all(p["born"] == document["created_at"] for p in visible)
    assert [m["id"] for p in visible for m in p["messages"]] == written[: document["sealed"]]


async def test_retracting_down_into_the_sealed_pages(paged: Store) -> None:
    acme = paged.scoped("acme").tasks
    tid = (await acme.create()).id
    written = await grow(acme, tid, 12)
    for _ in range(9):
        removed = await acme.retract_last(tid)
        assert removed is not None and removed.id == written.pop()
        assert ids(await acme.messages(tid)) == written
    await acme.add_human_message(tid, "again", message_id="again")
    assert ids(await acme.messages(tid)) == [*written, "again"]
    header = await acme.header(tid)
    assert header.seq == len(written) + 1


async def test_hostile_ids_reach_no_page_query_as_operators(paged: Store) -> None:
    acme = paged.scoped("acme").tasks
    tid = (await acme.create()).id
    await grow(acme, tid, 12)
    before = await dump(paged)
    for bad in ({"$ne": None}, "$where", "", None, 7):
        with pytest.raises(MindstoreError, match="message id"):
            await acme.get_message(tid, bad)  # type: ignore[arg-type]
    for bad_number in ({"$gt": 0}, "$where", 1.5, float("nan"), True):
        with pytest.raises(MindstoreError, match="start"):
            await acme.messages(tid, bad_number)  # type: ignore[arg-type]
    with pytest.raises(MindstoreError):
        await acme.read_range(tid, -1, 3)
    assert await dump(paged) == before
    other = paged.scoped("other").tasks
    with pytest.raises(MindstoreError):
        await other.messages(tid)


async def test_a_history_larger_than_a_document_is_created_in_steps(stores: StoreFactory) -> None:
    policy = PagePolicy(4, 300_000)
    store = stores.sibling(page_policy=policy)
    repo = TaskRepository(store.database, "acme", offload_threshold=10**9,
                          max_document_bytes=1_000_000, page_policy=policy)  # fmt: skip
    memory = mindstore.Task(id="big")
    for i in range(9):
        memory.add_human_message(f"{i}" * 200_000)
    record = await repo.create(task_id="big", messages=memory.messages, replay=True)
    assert record.seq == 9
    stored = await repo.messages("big")
    assert [message_to_dict(m) for m in stored] == [message_to_dict(m) for m in memory.messages]
    assert (await raw_task(store, "big"))["pages"] >= 2


async def test_a_replayed_append_of_a_sealed_message_is_recognised_and_a_fresh_one_reads_no_page(
    paged: Store,
) -> None:
    acme = paged.scoped("acme").tasks
    tid = (await acme.create()).id
    first = UserMessage(id="first", started_ts=1_700_000_000, content=[TextPart(text="hello")])
    await acme.add_message(tid, first)
    written = ["first", *await grow(acme, tid, 12)]
    assert (await raw_task(paged, tid))["sealed"] > 1  # "first" is in a sealed page
    before = await dump(paged)
    again = await acme.add_message(tid, first)  # a late replay of the first append
    assert again.id == "first" and ids(await acme.messages(tid)) == written
    assert await dump(paged) == before
    await acme.add_human_message(tid, "warm", message_id="warm")  # the header is cached again
    # fresh messages with the oldest and a future timestamp: ids decide, not the clock
    for n, ts in enumerate((0, 4_000_000_000)):
        fresh = UserMessage(id=f"fresh{n}", started_ts=ts, content=[TextPart(text="new")])
        with paged.backend.recorder.capture() as log:
            await acme.add_message(tid, fresh)
        verb = [(c.name, c.collection) for c in log][:1]  # a seal may follow it
        assert verb == [("update", "tasks")]  # one guarded update, no read before it


async def test_load_and_watch_cover_the_pages(paged: Store) -> None:
    acme = paged.scoped("acme").tasks
    tid = (await acme.create()).id
    written = await grow(acme, tid, 14)
    assert (await raw_task(paged, tid))["sealed"] > 3
    task = await acme.load(tid)
    assert ids(task.messages) == written and task.header == await acme.header(tid)
    feed = acme.watch(tid, since_id="h1")
    seen = [event.message.id async for event in _first(feed, len(written) - 2)]
    assert seen == written[2:]


async def _first(stream: Any, count: int) -> Any:
    async for item in stream:
        yield item
        count -= 1
        if count == 0:
            return


async def _conversation(store: Store) -> str:
    """Owners, sub-tasks, tool calls and answers, usage: what the reports read."""
    repo = store.scoped("acme").tasks
    tid = (await repo.create(task_id="T", owner="alice", config=CONFIG)).id
    for turn in range(6):
        await repo.add_human_message(tid, f"question {turn}", message_id=f"u{turn}")
        reply = await repo.add_assistant_message(tid, message_id=f"a{turn}")
        call = ToolCallPart(tool_call_id=f"c{turn}", tool_name="search", args={"q": turn})
        await repo.add_tool_call_part(tid, reply.id, call)
        await repo.finish_assistant_message(tid, reply.id, tokens_in=10 + turn, tokens_out=3)
        await grow(repo, tid, 3, f"f{turn}-")
        await repo.answer_tool_call(tid, f"c{turn}", {"hits": turn}, message_id=f"r{turn}")
    delegate = await repo.add_assistant_message(tid, message_id="d")
    await repo.add_tool_call_part(
        tid, delegate.id, ToolCallPart(tool_call_id="dc", tool_name="delegate", args={})
    )
    await repo.add_task_entry(tid, [TextPart(text="sub")], SUB, "e")
    await grow(repo, tid, 6, "s")
    await repo.add_task_exit(tid, [TextPart(text="done")], "task_result", None, "x", "xr")
    return tid


async def test_analytics_and_backups_of_a_paged_task_equal_the_unpaged_ones(
    stores: StoreFactory, tmp_path: Any
) -> None:
    from mindstore.backup import backup, restore, verify

    results = []
    for name, policy in (("paged", SMALL), ("unpaged", None)):
        with frozen_world():
            store = await stores.fresh(page_policy=policy)
            await _conversation(store)
            analytics = store.scoped("acme").analytics
            reports = [await analytics.usage(), await analytics.tools(), await analytics.sessions(),
                       await analytics.subtasks(), await analytics.latency(),
                       await analytics.top_owners()]  # fmt: skip
            archive = tmp_path / name
            await backup(store, archive)
            await verify(archive)
            target = await stores.fresh(page_policy=policy)
            await restore(target, archive)
            restored = await target.scoped("acme").tasks.messages("T")
            original = await store.scoped("acme").tasks.messages("T")
            assert [message_to_dict(m) for m in restored] == [message_to_dict(m) for m in original]
            results.append((reports, [message_to_dict(m) for m in original]))
            if policy is not None:
                assert (await raw_task(store, "T"))["pages"] > 5
    assert results[0] == results[1]


MESSAGES = st.fixed_dictionaries({
    "id": st.just("m"),
    "status": st.sampled_from(["loading", "completed"]),
    "content": st.lists(st.fixed_dictionaries({"type": st.just("text"),
                                               "text": st.text(max_size=4)}), max_size=3),
})  # fmt: skip
PATHS = st.one_of(
    st.sampled_from(["finished_ts", "status", "tokens_in", "metadata.note"]),
    st.builds(lambda k, f: f"content.{k}.{f}", st.integers(0, 3),
              st.sampled_from(["text", "is_loading"])),
    st.builds(lambda k: f"content.{k}", st.integers(0, 3)),
)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(message=MESSAGES, path=PATHS, value=st.one_of(st.none(), st.booleans(), st.text(max_size=3)),
       remove=st.booleans())  # fmt: skip
def test_a_pending_entry_applies_as_the_update_it_stands_for(
    message: dict[str, Any], path: str, value: Any, remove: bool
) -> None:
    """`apply_entry` (readers, folds) gives what `$set`/`$unset` of that path gives."""
    import copy as copying

    import mongomock

    from mindstore.model.paging import apply_entry, pending_entry

    # removing an array item: MongoDB leaves a null there, mongomock leaves the item; a
    # pending removal never names one (only message fields at their default are removed)
    assume(not (remove and path.rsplit(".", 1)[-1].isdigit()))
    collection = mongomock.MongoClient().db.pages
    collection.insert_one({"_id": 1, "m": copying.deepcopy(message)})
    operator = {"$unset": {f"m.{path}": ""}} if remove else {"$set": {f"m.{path}": value}}
    try:
        collection.update_one({"_id": 1}, operator)
    except Exception:  # a path the database refuses is not one a verb writes
        return
    expected = collection.find_one({"_id": 1})["m"]
    mine = copying.deepcopy(message)
    apply_entry(mine, pending_entry("m", 0, path, value, absent=remove))
    assert mine == expected


async def test_part_verbs_on_a_sealed_last_message_plan_from_what_is_stored(
    stores: StoreFactory,
) -> None:
    """Retracting can leave the open page empty, the last message sealed: part verbs on it
    go to `pending`, and the next one plans from the stored message, not a stale copy."""
    store = stores.sibling(page_policy=PagePolicy(4, 60))
    repo = store.scoped("acme").tasks
    tid = (await repo.create(config=CONFIG)).id
    for turn in range(12):
        asked = await repo.add_assistant_message(tid, message_id=f"a{turn}")
        await repo.add_human_message(tid, f"and {turn}", message_id=f"h{turn}")
        if [m["id"] for m in (await raw_task(store, tid))["messages"]] == [f"h{turn}"]:
            break
    else:
        pytest.fail("no state with a sealed assistant message right before the open page")
    await repo.retract_last(tid)
    assert (await raw_task(store, tid))["messages"] == []
    await repo.add_text_part(tid, asked.id, "one ")
    await repo.add_text_part(tid, asked.id, "two")
    stored = await repo.get_message(tid, asked.id)
    assert stored is not None and stored.text() == "one two"
