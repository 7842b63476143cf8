"""Paged storage under exact interleavings: each guard of docs/write-paths.md ("Paged
storage") raced at the one point where it matters.

No sleeps and no timing: another writer's verb runs inside a hooked collection call of the
code under test (`interleaving.hooked`), so it lands exactly between two of its steps.
Writers are separate "processes" (sibling stores: own locks and header caches) on the
same database, so only the stored guards keep them apart. Each test here fails with the
guard it covers removed (the commit that added them lists which).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any
from unittest import mock

import pytest

from conftest import StoreFactory
from interleaving import READS, WRITES, hooked
from mindstore import PagePolicy, TenantStore
from mindstore.ids import task_key
from mindstore.model.messages import AnyMessage
from mindstore.model.parts import TaskConfigPart, TextPart, ToolCallPart, ToolMetadata
from mindstore.model.storage_form import bson_size
from mindstore.repositories import pages as pages_module
from paging_fixtures import crash, unfolded

SMALL = PagePolicy(page_messages=4, page_bytes=4096)
CONFIG = TaskConfigPart(
    model_name="m",
    tool_metadata=[ToolMetadata(name="search"), ToolMetadata(name="delegate", is_task_entry=True)],
)
SUB = TaskConfigPart(model_name="sub", tool_metadata=[ToolMetadata(name="search")])


@contextmanager
def stale_pages() -> Iterator[list[Any]]:
    """Every `StalePage` raised in the block (a read found a page newer than its task)."""
    raised: list[Any] = []
    original = pages_module.StalePage.__init__

    def init(self: Exception, *args: Any) -> None:
        raised.append(args)
        original(self, *args)

    with mock.patch.object(pages_module.StalePage, "__init__", init):
        yield raised


def ids(messages: list[AnyMessage]) -> list[str]:
    return [message.id for message in messages]


async def grow(tasks: Any, tid: str, count: int, prefix: str = "h") -> list[str]:
    for i in range(count):
        await tasks.add_human_message(tid, f"{prefix}{i} " + "x" * 40, message_id=f"{prefix}{i}")
    return [f"{prefix}{i}" for i in range(count)]


async def raw_task(view: TenantStore, tid: str) -> dict[str, Any]:
    document = await view.store.database["tasks"].find_one({"_id": task_key(view.tenant, tid)})
    assert document is not None
    return document


async def raw_pages(view: TenantStore, tid: str) -> list[dict[str, Any]]:
    query = {"tenant": view.tenant, "task": task_key(view.tenant, tid)}
    found = await view.store.database["task_pages"].find(query).to_list(None)
    return sorted(found, key=lambda page: page["page"])


async def check_stored(view: TenantStore, tid: str) -> list[str]:
    """The stored layout is one history: visible pages contiguous from 0 to the mark, the
    open page after them up to `seq`, sizes exact; returns the ids in order."""
    document = await raw_task(view, tid)
    visible = [p for p in await raw_pages(view, tid) if p["page"] < document.get("pages", 0)]
    assert [p["page"] for p in visible] == list(range(document.get("pages", 0)))
    assert [p["start"] for p in visible] == [0, *(p["end"] for p in visible)][: len(visible)]
    assert all(p["end"] - p["start"] == len(p["messages"]) for p in visible)
    assert document.get("sealed", 0) == (visible[-1]["end"] if visible else 0)
    assert document.get("sealed", 0) + len(document["messages"]) == document["seq"]
    stored = [m for p in visible for m in p["messages"]] + document["messages"]
    assert document["size_bytes"] == sum(bson_size(m) for m in stored)
    assert document.get("sealed_bytes", 0) == sum(p["size_bytes"] for p in visible)
    for page in visible:
        assert page["size_bytes"] == sum(bson_size(m) for m in page["messages"])
    return [m["id"] for m in stored]


def answered_calls(messages: list[AnyMessage]) -> set[str]:
    return {
        part.tool_call_id
        for message in messages
        for part in getattr(message, "content", [])
        if isinstance(part, ToolCallPart) and part.is_loading is False
    }


def answers(messages: list[AnyMessage]) -> set[str]:
    return {
        part.tool_call_id
        for message in messages
        if message.role == "tool"
        for part in message.content
        if getattr(part, "tool_call_id", None)
    }


async def sealed_call(tasks: Any, tid: str, view: TenantStore) -> None:
    """A task whose call `c0` (message `a0`) is in a sealed page, the open page not due."""
    asked = await tasks.add_assistant_message(tid, message_id="a0")
    await tasks.add_tool_call_part(
        tid, asked.id, ToolCallPart(tool_call_id="c0", tool_name="search", args={})
    )
    await grow(tasks, tid, 10)
    document = await raw_task(view, tid)
    assert document["sealed"] > 1 and len(document["messages"]) < 2 * SMALL.page_messages - 1


# ---------------------------------------------------------------------- one version per read
Read = Callable[[Any, str], Awaitable[list[AnyMessage]]]


async def _context(tasks: Any, tid: str) -> list[AnyMessage]:
    return list(await tasks.context(tid, auto_compress=False))


async def _ends(tasks: Any, tid: str) -> list[AnyMessage]:
    _count, head, tail = await tasks.ends(tid, 4, 2)
    return [*head, *tail]


async def _load(tasks: Any, tid: str) -> list[AnyMessage]:
    return list((await tasks.load(tid)).messages)


READS_OF_A_HISTORY: dict[str, Read] = {
    "messages": lambda tasks, tid: tasks.messages(tid),
    "tail": lambda tasks, tid: tasks.tail(tid, 100),
    "ends": _ends,
    "load": _load,
    "level": lambda tasks, tid: tasks.level_messages(tid, None),
    "context": _context,
}


# `context` reads its pages inside one pipeline over the task document (`$lookup`), so no
# page read comes after the task's to land a fold before; its version check is tested in
# tests/test_context_window.py (a row that saw a newer page or task is never used)
@pytest.mark.parametrize("read", sorted(set(READS_OF_A_HISTORY) - {"context"}))
async def test_a_fold_landing_mid_read_makes_the_read_start_over_on_one_version(
    stores: StoreFactory, read: str
) -> None:
    """Between a reader's read of the task document and its read of the pages, another
    process answers the sealed call: the answer is appended to the task document, the
    call's flag folded into its page (page version newer than the task the reader read).
    The reader must not pair that page with its older task document (a call marked
    answered without its answer): it finds the page newer (`StalePage`) and reads again."""
    writer = stores.sibling(page_policy=SMALL).scoped("acme")
    reader = stores.sibling(page_policy=SMALL).scoped("acme")
    tid = (await writer.tasks.create(config=CONFIG)).id
    await sealed_call(writer.tasks, tid, writer)
    run = READS_OF_A_HISTORY[read]
    order: list[str] = []
    with (
        hooked(reader.tasks.port.scope, "tasks", READS, log=order) as task_reads,
        hooked(reader.tasks.port.scope, "pages", READS, log=order),
    ):
        before = await run(reader.tasks, tid)
    assert answered_calls(before) == answers(before) == set()
    # the fold lands right before the first page read after the last task document read
    # (a window read reads the task, then pages, more than once)
    last_task_read = len(order) - order[::-1].index("tasks")
    skip = order[:last_task_read].count("pages")
    assert "pages" in order[last_task_read:]

    async def answer() -> None:
        await writer.tasks.answer_tool_call(tid, "c0", {"n": 1}, message_id="r0")
        assert not (await raw_task(writer, tid)).get("pending")  # folded into the page
        assert max(p["version"] for p in await raw_pages(writer, tid)) > version_read

    version_read = (await raw_task(writer, tid))["version"]
    with (
        stale_pages() as raised,
        hooked(reader.tasks.port.scope, "tasks", READS) as retried,
        hooked(reader.tasks.port.scope, "pages", READS, answer, skip=skip) as page_reads,
    ):
        during = await run(reader.tasks, tid)
    assert page_reads.fired == 1 and raised  # the fold landed mid-read and was noticed
    assert len(retried.calls) > len(task_reads.calls)  # the task document was read again
    assert answered_calls(during) == answers(during) == {"c0"}  # one version: the newer
    assert ids(during) == ids(await run(reader.tasks, tid))
    assert "r0" in await check_stored(writer, tid)


async def test_a_read_whose_pages_change_under_every_retry_is_a_conflict(
    stores: StoreFactory,
) -> None:
    """A page that is newer than the task on every attempt: the read gives up with the
    typed `Conflict` (bounded retries), never a torn answer."""
    from mindstore.errors import Conflict

    writer = stores.sibling(page_policy=SMALL).scoped("acme")
    reader = stores.sibling(page_policy=SMALL).scoped("acme")
    tid = (await writer.tasks.create(config=CONFIG)).id
    await sealed_call(writer.tasks, tid, writer)
    pages = writer.store.database["task_pages"]

    async def newer_page() -> None:  # a fold's version bump, as the next read finds it
        await pages.update_many({"task": task_key("acme", tid)}, {"$inc": {"version": 1000}})

    with (
        hooked(reader.tasks.port.scope, "pages", READS, newer_page, times=None) as page_reads,
        pytest.raises(Conflict, match="kept changing"),
    ):
        await reader.tasks.messages(tid)
    assert 1 < page_reads.fired <= pages_module.STALE_READS  # bounded


class _Database:
    """A database whose named collections are replaced (hooked ones), the rest as is."""

    def __init__(self, inner: Any, **collections: Any) -> None:
        self.inner = inner
        self.collections = collections

    def __getitem__(self, name: str) -> Any:
        return self.collections.get(name) or self.inner[name]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def test_a_backup_taken_while_a_sealed_call_is_answered_holds_one_version(
    stores: StoreFactory, tmp_path: Any
) -> None:
    """While a backup reads a task's pages, another process answers a call in one of them
    (the answer in the task document, the flag folded into the page). The backup must not
    pair the newer page with the task record it read before: the restored task has the
    call answered exactly when it has the answer."""
    from mindstore.backup import backup, restore, verify

    writer = stores.sibling(page_policy=SMALL).scoped("acme")
    tid = (await writer.tasks.create(config=CONFIG)).id
    await sealed_call(writer.tasks, tid, writer)
    backing_up = stores.sibling()
    holder = SimpleNamespace(pages=backing_up.database["task_pages"])

    async def answer() -> None:
        await writer.tasks.answer_tool_call(tid, "c0", {"n": 1}, message_id="r0")

    with hooked(holder, "pages", READS, answer) as page_reads:
        backing_up.database = _Database(backing_up.database, task_pages=holder.pages)
        await backup(backing_up, tmp_path / "b", tenant="acme")
    assert page_reads.fired == 1
    await verify(tmp_path / "b")
    target = await stores.fresh()
    await restore(target, tmp_path / "b")
    restored = await target.scoped("acme").tasks.messages(tid)
    assert answered_calls(restored) == answers(restored)
    assert ids(restored) == ids(await writer.tasks.messages(tid))  # the newer version


# ---------------------------------------------------------------------- seals
async def test_an_older_seal_never_overwrites_a_newer_page(stores: StoreFactory) -> None:
    """Process O starts sealing from version v; before it writes its first page, process
    N appends, seals the same pages from a newer version and folds an answered call into
    page 0. O's page write must not replace that page (its filter only matches a page
    written from v or before): O's seal stops, and page 0 keeps the answered call."""
    builder = stores.sibling(page_policy=None).scoped("acme")  # an unpaged history
    older = stores.sibling(page_policy=SMALL).scoped("acme")
    newer = stores.sibling(page_policy=SMALL).scoped("acme")
    tid = (await builder.tasks.create(config=CONFIG)).id
    asked = await builder.tasks.add_assistant_message(tid, message_id="a0")
    await builder.tasks.add_tool_call_part(
        tid, asked.id, ToolCallPart(tool_call_id="c0", tool_name="search", args={})
    )
    await grow(builder.tasks, tid, 10)
    assert (await raw_task(builder, tid)).get("pages", 0) == 0  # 12 messages, none sealed
    newest: dict[str, Any] = {}

    async def newer_seals_and_folds() -> None:
        await newer.tasks.add_human_message(tid, "newer", message_id="n0")  # seals
        assert (await raw_task(newer, tid))["pages"] >= 2
        await newer.tasks.answer_tool_call(tid, "c0", {"n": 1}, message_id="r0")  # folds
        newest.update((await raw_pages(newer, tid))[0])
        assert newest["messages"][1]["content"][0]["is_loading"] is False

    with hooked(older.tasks.port.scope, "pages", ("replace_one",), newer_seals_and_folds) as writes:
        await older.tasks.add_human_message(tid, "older", message_id="o0")  # seals after it
    assert writes.fired == 1
    assert (await raw_pages(older, tid))[0] == newest  # the newer page is untouched
    messages = await older.tasks.messages(tid)
    assert answered_calls(messages) == answers(messages) == {"c0"}
    assert ids(messages) == await check_stored(older, tid)
    assert ids(messages)[-3:] == ["o0", "n0", "r0"]
    await grow(older.tasks, tid, 8, "later")  # and later seals go on from there
    assert ids(await older.tasks.messages(tid)) == await check_stored(older, tid)


async def test_a_seal_that_lost_to_a_newer_one_does_not_move_the_mark_back(
    stores: StoreFactory,
) -> None:
    """Process A has written its pages (messages [0, 8)) and is about to advance the
    mark; meanwhile process B appends, seals the same pages and more (mark at 12). A's
    task update is guarded by the mark it read, so it matches nothing: the mark never
    goes back to 8 (which would hide messages 8 to 11 in a page past it)."""
    builder = stores.sibling(page_policy=None).scoped("acme")
    sealer = stores.sibling(page_policy=SMALL).scoped("acme")
    other = stores.sibling(page_policy=SMALL).scoped("acme")
    tid = (await builder.tasks.create()).id
    written = [*await grow(builder.tasks, tid, 10), "a"]

    async def other_seals_further() -> None:
        written.extend(await grow(other.tasks, tid, 5, "b"))
        assert (await raw_task(other, tid))["sealed"] == 12

    # the sealer's first task update is its append, the second its seal's
    scope = sealer.tasks.port.scope
    with hooked(scope, "tasks", ("update_one",), other_seals_further, skip=1) as writes:
        await sealer.tasks.add_human_message(tid, "due", message_id="a")
    assert writes.fired == 1
    assert (await raw_task(sealer, tid))["sealed"] == 12
    assert ids(await sealer.tasks.messages(tid)) == written == await check_stored(sealer, tid)


async def _forced_seal_raced(stores: StoreFactory) -> tuple[TenantStore, str, list[str], bool]:
    """A write that does not fit in the task document seals first (everything but the
    last message, pinned to the exact version); another process appends while that seal
    writes its pages. Returns (view, task id, ids written, whether the write was refused)."""
    from mindstore.errors import TaskTooLarge
    from mindstore.repositories.tasks import TaskRepository

    store = stores.sibling(page_policy=None)
    policy = PagePolicy(8, 4 * 1024 * 1024)  # no ordinary seal: the 2 MiB limit forces one

    def process() -> TaskRepository:
        return TaskRepository(store.database, "acme", offload_threshold=10**9,
                              max_document_bytes=2 * 1024 * 1024, page_policy=policy)  # fmt: skip

    forcer, other = process(), process()
    tid = (await forcer.create()).id
    written = []
    for i in range(6):
        await forcer.add_human_message(tid, str(i) * 300_000, message_id=f"big{i}")
        written.append(f"big{i}")

    async def append() -> None:
        await other.add_human_message(tid, "small", message_id="x")
        written.append("x")

    refused = False
    with hooked(forcer.port.scope, "pages", ("replace_one",), append) as writes:
        try:
            await forcer.add_human_message(tid, "6" * 300_000, message_id="big6")
            written.append("big6")
        except TaskTooLarge:
            refused = True
    assert writes.fired == 1
    return store.scoped("acme"), tid, written, refused


async def test_a_forced_seal_racing_an_append_loses_no_message(stores: StoreFactory) -> None:
    """The forced seal keeps the open page's tail by position (`$slice`), so it must not
    land once another message was appended: it is guarded by the exact version."""
    view, tid, written, _refused = await _forced_seal_raced(stores)
    assert ids(await view.tasks.messages(tid)) == written == await check_stored(view, tid)


async def test_a_write_whose_forced_seal_lost_a_race_is_retried(stores: StoreFactory) -> None:
    view, tid, written, refused = await _forced_seal_raced(stores)
    assert not refused and written[-1] == "big6"
    assert ids(await view.tasks.messages(tid)) == written


async def test_a_retract_racing_a_seal_makes_the_seal_lose(stores: StoreFactory) -> None:
    """A seal reads the open page, then writes pages; meanwhile another process retracts
    messages down into the range the seal cuts and appends a new one. The retracts bump
    `patched`, so the seal's task update (guarded by it) matches nothing: no retracted
    message comes back from a page, none is lost."""
    builder = stores.sibling(page_policy=None).scoped("acme")
    sealer = stores.sibling(page_policy=SMALL).scoped("acme")
    other = stores.sibling(page_policy=None).scoped("acme")  # it never seals itself
    tid = (await builder.tasks.create()).id
    written = await grow(builder.tasks, tid, 11)
    gone: list[str] = []

    async def retract_into_the_cut() -> None:
        for _ in range(5):  # "s", h10, h9, h8 and h7: the seal cuts messages [0, 8)
            removed = await other.tasks.retract_last(tid)
            assert removed is not None
            gone.append(removed.id)
        await other.tasks.add_human_message(tid, "again", message_id="again")

    with hooked(sealer.tasks.port.scope, "pages", ("replace_one",), retract_into_the_cut) as writes:
        await sealer.tasks.add_human_message(tid, "due", message_id="s")  # seals after it
    assert writes.fired == 1 and gone == ["s", "h10", "h9", "h8", "h7"]
    expected = [*written[:7], "again"]
    assert ids(await sealer.tasks.messages(tid)) == expected
    assert await check_stored(sealer, tid) == expected
    assert (await raw_task(sealer, tid)).get("pages", 0) == 0  # the seal lost
    await grow(sealer.tasks, tid, 9, "n")  # the next seal cuts from what is stored
    expected += [f"n{i}" for i in range(9)]
    assert (await raw_task(sealer, tid))["pages"] >= 2
    assert ids(await sealer.tasks.messages(tid)) == expected == await check_stored(sealer, tid)


async def test_a_change_to_a_message_being_sealed_makes_the_seal_lose(
    stores: StoreFactory,
) -> None:
    """While a seal writes its pages, another process answers a call held by a message
    the seal is moving (an open message other than the last). The answer bumps `patched`,
    the seal's task update matches nothing, so the copy the seal read (call still open)
    never replaces the answered one."""
    builder = stores.sibling(page_policy=None).scoped("acme")
    sealer = stores.sibling(page_policy=SMALL).scoped("acme")
    other = stores.sibling(page_policy=SMALL).scoped("acme")
    tid = (await builder.tasks.create(config=CONFIG)).id
    asked = await builder.tasks.add_assistant_message(tid, message_id="a0")
    await builder.tasks.add_tool_call_part(
        tid, asked.id, ToolCallPart(tool_call_id="c0", tool_name="search", args={})
    )
    await grow(builder.tasks, tid, 10)

    async def answer() -> None:
        # the other process's own seal after its answer is cut short (a crash at its first
        # page write), so only the answer races the seal under way
        with hooked(other.tasks.port.scope, "pages", WRITES, crash, times=None) as its_seal:
            await other.tasks.answer_tool_call(tid, "c0", {"n": 1}, message_id="r0")
        assert its_seal.fired == 1

    with hooked(sealer.tasks.port.scope, "pages", ("replace_one",), answer) as writes:
        await sealer.tasks.add_human_message(tid, "due", message_id="s")
    assert writes.fired == 1
    assert (await raw_task(sealer, tid)).get("pages", 0) == 0  # the seal lost
    messages = await sealer.tasks.messages(tid)
    assert answered_calls(messages) == answers(messages) == {"c0"}
    assert ids(messages) == await check_stored(sealer, tid)
    await grow(sealer.tasks, tid, 8, "later")
    messages = await sealer.tasks.messages(tid)
    assert answered_calls(messages) == {"c0"} and (await raw_task(sealer, tid))["pages"] >= 2
    assert ids(messages) == await check_stored(sealer, tid)


async def test_bringing_a_page_back_for_a_retract_never_drops_a_message_appended_meanwhile(
    stores: StoreFactory,
) -> None:
    """Every message sealed (the open page emptied by retracts): retracting the last one
    first brings its page back into the task document. If another process appends in
    between, that update is guarded by the version it read and matches nothing; the
    retract then finds its message is no longer the last one."""
    from mindstore.errors import InvalidTransition

    retractor = stores.sibling(page_policy=SMALL).scoped("acme")
    other = stores.sibling(page_policy=SMALL).scoped("acme")
    tid = (await retractor.tasks.create()).id
    written = await grow(retractor.tasks, tid, 12)
    while (await raw_task(retractor, tid))["messages"]:
        removed = await retractor.tasks.retract_last(tid)
        assert removed is not None and removed.id == written.pop()
    assert (await raw_task(retractor, tid))["sealed"] == len(written) == 8

    async def append() -> None:
        await other.tasks.add_human_message(tid, "meanwhile", message_id="x")
        written.append("x")

    with (
        hooked(retractor.tasks.port.scope, "tasks", ("update_one",), append) as writes,
        pytest.raises(InvalidTransition, match="not the last message"),
    ):
        await retractor.tasks.retract_last(tid, expected_id="h7")
    assert writes.fired == 1
    assert ids(await retractor.tasks.messages(tid)) == written == await check_stored(retractor, tid)
    removed = await retractor.tasks.retract_last(tid, expected_id="x")
    assert removed is not None and ids(await retractor.tasks.messages(tid)) == written[:-1]


# ---------------------------------------------------------------------- folds
async def test_an_older_fold_never_overwrites_a_newer_one(stores: StoreFactory) -> None:
    """Process 1 answers the sealed call and folds the flags into the page; between its
    read of the page and its write, process 2 adds text to the same message and folds
    both changes. Process 1's write (compare-and-set on the page version it read) must
    not put back the message without the text."""
    first = stores.sibling(page_policy=SMALL).scoped("acme")
    second = stores.sibling(page_policy=SMALL).scoped("acme")
    tid = (await first.tasks.create(config=CONFIG)).id
    await sealed_call(first.tasks, tid, first)

    async def second_changes_the_message() -> None:
        await second.tasks.add_text_part(tid, "a0", "late text")
        assert not (await raw_task(second, tid)).get("pending")  # its fold finished

    scope = first.tasks.port.scope
    with hooked(scope, "pages", ("update_one",), second_changes_the_message) as folds:
        await first.tasks.answer_tool_call(tid, "c0", {"n": 1}, message_id="r0")
    assert folds.fired == 1
    message = await first.tasks.get_message(tid, "a0")
    assert message is not None and message.text() == "late text"
    assert answered_calls([message]) == {"c0"}
    page = next(p for p in await raw_pages(first, tid) if p["start"] <= 1 < p["end"])
    stored = page["messages"][1 - page["start"]]
    assert stored["content"][-1]["text"] == "late text" and not (await raw_task(first, tid)).get(
        "pending"
    )
    assert "r0" in await check_stored(first, tid)


async def test_a_fold_never_clears_a_change_it_did_not_fold(stores: StoreFactory) -> None:
    """Process 1 folds its change into the page; before it clears the task's `pending`
    list, process 2 commits another change to a sealed message (its own fold fails). The
    clear is guarded by the last change process 1 folded, so process 2's change stays
    pending (readers apply it) until a later fold puts it in its page."""
    first = stores.sibling(page_policy=SMALL).scoped("acme")
    second = stores.sibling(page_policy=SMALL).scoped("acme")
    tid = (await first.tasks.create(config=CONFIG)).id
    await sealed_call(first.tasks, tid, first)

    async def second_changes_the_message() -> None:
        with unfolded(second.tasks):
            await second.tasks.add_text_part(tid, "a0", "late text")

    def clear(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        return "pending" in args[1].get("$unset", {})

    with hooked(first.tasks.port.scope, "tasks", ("update_one",), second_changes_the_message,
                when=clear) as clears:  # fmt: skip
        await first.tasks.answer_tool_call(tid, "c0", {"n": 1}, message_id="r0")
    assert clears.fired == 1
    document = await raw_task(first, tid)
    assert [entry["p"] for entry in document["pending"]][-1].startswith("content")
    message = await first.tasks.get_message(tid, "a0")
    assert message is not None and message.text() == "late text"
    assert answered_calls([message]) == {"c0"}
    await first.tasks.add_human_message(tid, "next", message_id="next")  # folds the rest
    assert not (await raw_task(first, tid)).get("pending")
    message = await second.tasks.get_message(tid, "a0")
    assert message is not None and message.text() == "late text"
    assert "next" in await check_stored(first, tid)


# ---------------------------------------------------------------------- exactly once
@pytest.mark.parametrize("where", ["open page", "sealed page"])
async def test_concurrent_redactions_from_separate_processes_apply_once(
    stores: StoreFactory, where: str
) -> None:
    """Eight processes redact one message at once (each its own lock and header cache):
    the version guard lets one write through, the others find it redacted and write
    nothing, so every caller sees the one redaction."""
    first = stores.sibling(page_policy=SMALL).scoped("acme")
    tid = (await first.tasks.create()).id
    await first.tasks.add_human_message(tid, "my card is 4111", message_id="secret")
    await grow(first.tasks, tid, 12 if where == "sealed page" else 2)
    document = await raw_task(first, tid)
    assert (document.get("sealed", 0) > 0) == (where == "sealed page")
    version = document["version"]
    views = [stores.sibling(page_policy=SMALL).scoped("acme") for _ in range(8)]

    async def redact(n: int) -> AnyMessage:
        message: AnyMessage = await views[n].tasks.redact(tid, "secret", reason=f"r{n}")
        return message

    results = await asyncio.gather(*(redact(n) for n in range(8)))
    reasons = {result.to_dict()["redaction"]["reason"] for result in results}
    assert len(reasons) == 1  # every caller sees the one redaction that happened
    document = await raw_task(first, tid)
    assert document["version"] == version + 1
    stored = await first.tasks.get_message(tid, "secret")
    assert stored is not None and stored.to_dict()["redaction"]["reason"] in reasons
    assert "4111" not in str(stored.to_dict())
    await check_stored(first, tid)


# ---------------------------------------------------------------------- tenants
@pytest.fixture
async def namesakes(stores: StoreFactory) -> tuple[TenantStore, TenantStore]:
    return await make_namesakes(stores)


async def make_namesakes(stores: StoreFactory) -> tuple[TenantStore, TenantStore]:
    """Task "T" in tenants acme and beta (task ids are per tenant), both paged, with the
    same shape (calls, a sub-task) and different messages and usage; each with a change
    to a sealed message not folded into its page yet (the fold failed: `pending`)."""
    store = stores.sibling(page_policy=SMALL)
    views = store.scoped("acme"), store.scoped("beta")
    for view in views:
        tasks = view.tasks
        await tasks.create(task_id="T", owner="olga", config=CONFIG)
        for turn in range(4):
            await tasks.add_human_message("T", f"{view.tenant} asks {turn}", message_id=f"u{turn}")
            reply = await tasks.add_assistant_message("T", message_id=f"a{turn}")
            await tasks.add_tool_call_part("T", reply.id, ToolCallPart(
                tool_call_id=f"c{turn}", tool_name="search", args={"q": view.tenant}))  # fmt: skip
            if turn:
                await tasks.finish_assistant_message(
                    "T", reply.id, tokens_in=10 if view.tenant == "acme" else 1000, tokens_out=1
                )
            await tasks.answer_tool_call("T", f"c{turn}", {"from": view.tenant},
                                         message_id=f"r{turn}")  # fmt: skip
        delegate = await tasks.add_assistant_message("T", message_id="d")
        await tasks.add_tool_call_part("T", delegate.id, ToolCallPart(
            tool_call_id="dc", tool_name="delegate", args={}))  # fmt: skip
        await tasks.add_task_entry("T", [TextPart(text="sub")], SUB, "e")
        await grow(tasks, "T", 6, f"{view.tenant}-s")
        with hooked(tasks.port.scope, "pages", ("update_one",), crash) as fold:
            await tasks.finish_assistant_message("T", "a0", tokens_in=7, tokens_out=7)
        assert fold.fired == 1
        document = await raw_task(view, "T")
        assert document["pages"] >= 3 and document["pending"]
    return views


async def _forge(attacker: TenantStore, victim: TenantStore) -> None:
    """Page documents stored under the attacker's tenant that name the victim's task and
    its page numbers (their ids are the attacker's): never part of the victim's history."""
    database = attacker.store.database["task_pages"]
    theirs = await raw_pages(attacker, "T")
    victim_key = task_key(victim.tenant, "T")
    forged = [dict(page, _id=f"{attacker.tenant}/forged#{page['page']}", task=victim_key)
              for page in theirs]  # fmt: skip
    await database.insert_many(forged)


async def _reads(view: TenantStore) -> dict[str, Any]:
    tasks = view.tasks
    return {
        "messages": [m.to_dict() for m in await tasks.messages("T")],
        "tail": ids(await tasks.tail("T", 30)),
        "ends": [ids(part) for part in (await tasks.ends("T", 5, 5))[1:]],
        "get": [(await tasks.get_message("T", i)).to_dict()  # type: ignore[union-attr]
                for i in ("u0", "a0", "a1", "r2")],
        "level": ids(await tasks.level_messages("T", None)),
        "spans": await tasks.sub_task_spans("T"),
        "load": ids((await tasks.load("T")).messages),
        "context": ids(list(await tasks.context("T", auto_compress=False))),
    }  # fmt: skip


async def _reports(view: TenantStore) -> dict[str, Any]:
    a = view.analytics
    return {
        "usage": await a.usage(group_by=("owner",)),
        "tools": await a.tools(),
        "sessions": await a.sessions(),
        "owners": await a.top_owners(by="tokens_in"),
        "latency": await a.latency(group_by="owner"),
        "subtasks": await a.subtasks(),
    }


@pytest.mark.parametrize("what", ["reads", "reports"])
async def test_page_reads_and_reports_stay_in_their_tenant(
    namesakes: tuple[TenantStore, TenantStore], what: str
) -> None:
    """Both tenants paged, each with a task "T": every read (or report) of one is the
    same before and after pages that claim its task are stored under the other tenant."""
    run = _reads if what == "reads" else _reports
    acme, beta = namesakes
    before = {view.tenant: await run(view) for view in namesakes}
    assert before["acme"] != before["beta"]
    await _forge(acme, beta)
    await _forge(beta, acme)
    for view in namesakes:
        assert await run(view) == before[view.tenant], view.tenant
