"""All-or-nothing creates: a long history becomes visible at once or not at all.

`tasks.create` of a history due for a seal writes its sealed pages first and its task
document last (`repositories/bulk_pages.py`). These tests cut a create short at one of its
writes (the k-th write to the tasks, pages, payloads or dialog-node collection raises,
before it is applied or after: a reply lost), for every k, and check that no reader (get,
messages, tail, list, analytics, a backup) sees any of the half-made task, that the next
create of the same id or `dialogs.repair()` finishes or rolls it back, and that nothing of
another task or tenant changed. The stores come from the suite's `store` fixture, paged
with small pages (`store.page_policy`), each example in tenants of its own.
"""

from __future__ import annotations

import copy
import functools
import itertools
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import bson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pymongo.errors import AutoReconnect

from mindstore import PagePolicy, Store, TenantStore
from mindstore.backup import backup
from mindstore.errors import Conflict, NotFound, TaskTooLarge, ValidationError
from mindstore.ids import page_key, task_key
from mindstore.model import base, id_filter
from mindstore.model.header import PAGING_FIELDS, TaskHeader
from mindstore.model.messages import message_to_dict
from mindstore.model.paging import cut_pages, should_seal
from mindstore.model.storage_form import bson_size
from mindstore.model.task import Task
from mindstore.repositories.bulk_pages import ORPHAN_GRACE, PAGE_FIELDS_BYTES, cut_history
from mindstore.repositories.engine import HEADER_BUDGET_BYTES, document_estimate
from mindstore.repositories.tasks import TaskRepository
from test_backup_support import read_file_records
from test_repository_property import CONFIG, OPS, apply

EXAMPLES = settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
POLICIES = st.builds(
    PagePolicy,
    page_messages=st.integers(1, 4),
    page_bytes=st.sampled_from([400, 2048, 1 << 20]),  # byte limits cut too, or only counts
)
WRITES = frozenset({
    "insert_one", "insert_many", "replace_one", "update_one", "update_many", "delete_one",
    "delete_many", "bulk_write", "find_one_and_update", "find_one_and_replace",
    "find_one_and_delete",
})  # fmt: skip
PAGING = PAGING_FIELDS
NAMES = itertools.count()


class Crash(AutoReconnect):
    """A connection lost mid-way: what a crash looks like to the code that survives it."""


class Writes:
    """Numbers the writes of the collections it wraps, in order; write `crash_at` raises
    `Crash`, before it is applied, or after it (`after`: the reply is lost)."""

    def __init__(
        self,
        crash_at: int | None = None,
        *,
        after: bool = False,
        meanwhile: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.count = 0
        self.crash_at = crash_at
        self.after = after
        self.meanwhile = meanwhile  # run to its end before write `crash_at`, instead of a crash


class Faulty:
    """A collection whose writes go through `Writes`; reads pass through unchanged."""

    def __init__(self, inner: Any, writes: Writes) -> None:
        self._inner = inner
        self._writes = writes

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._inner, name)
        if name not in WRITES:
            return method

        async def write(*args: Any, **kwargs: Any) -> Any:
            writes = self._writes
            number = writes.count
            writes.count += 1
            if number == writes.crash_at and writes.meanwhile is not None:
                await writes.meanwhile()
                return await method(*args, **kwargs)
            if number == writes.crash_at and not writes.after:
                raise Crash(name)
            result = await method(*args, **kwargs)
            if number == writes.crash_at:
                raise Crash(name)
            return result

        return write


def wrap(scoped: TenantStore, writes: Writes) -> None:
    """Route every write of the tenant view's tasks and dialogs through `writes`."""
    dialogs = scoped.dialogs.nodes  # the dialog parts' collections
    for holder, names in ((scoped.tasks.port.scope, ("tasks", "pages", "payloads", "nodes")),
                          (dialogs, ("task_documents", "collection", "task_pages"))):  # fmt: skip
        for name in names:
            setattr(holder, name, Faulty(getattr(holder, name), writes))


def paged(store: Store, policy: PagePolicy) -> Callable[[], TenantStore]:
    """Fresh tenants of the fixture's store, paged with `policy`."""
    store.page_policy = policy
    return lambda: store.scoped(f"t{next(NAMES)}")


async def conversation(ops: list[Any], padding: int) -> Task:
    """An in-memory task: the random verbs of the repository property test, then
    `padding` plain messages that push them into sealed pages."""
    memory = Task(id="T")
    memory.add_task_config(CONFIG)
    for step, op in enumerate(ops):
        await apply(op, step, memory, False, "T")
    for i in range(padding):
        memory.add_human_message(f"padding {i} " + "w" * (i % 5) * 20, message_id=f"p{i}")
    return memory


def extended(memory: Task, padding: int) -> Task:
    """`memory` with more padding messages, as `conversation` names them."""
    longer = copy.deepcopy(memory)
    for i in range(sum(m.id.startswith("p") for m in memory.messages), padding):
        longer.add_human_message(f"padding {i} " + "w" * (i % 5) * 20, message_id=f"p{i}")
    return longer


async def snapshot(store: Store, *tenants: str) -> dict[str, list[bytes]]:
    """Every stored document of these tenants, byte for byte."""
    out = {}
    for name in ("tasks", "task_pages", "payloads", "dialog_nodes"):
        found = await store.database[name].find({"tenant": {"$in": list(tenants)}}).to_list(None)
        out[name] = sorted(bson.encode(document) for document in found)
    return out


async def page_docs(store: Store, tenant: str, tid: str) -> list[dict[str, Any]]:
    found = await store.database["task_pages"].find({"task": task_key(tenant, tid)}).to_list(None)
    return sorted(found, key=lambda page: page["page"])


def without_paging(header: TaskHeader) -> TaskHeader:
    return header.model_copy(update=dict.fromkeys(PAGING, 0))


def dicts(messages: list[Any]) -> list[dict[str, Any]]:
    return [message_to_dict(message) for message in messages]


async def backed_up(store: Store, tenant: str, folder: Path) -> dict[str, set[str]]:
    """The task keys a backup of the tenant holds records of, by collection."""
    dest = folder / uuid.uuid4().hex
    await backup(store, dest, tenant=tenant)
    out = {}
    for name, field in (("tasks", "_id"), ("task_pages", "task"), ("payloads", "task_id")):
        path = dest / f"{name}.jsonl.gz"
        records = read_file_records(path) if path.exists() else []
        out[name] = {task_key(tenant, str(record[field]).rpartition("/")[2]) for record in records}
    return out


async def reports(scoped: TenantStore) -> tuple[Any, ...]:
    """What the tenant's analytics say (usage and activity)."""
    analytics = scoped.analytics
    return await analytics.usage(group_by=("model", "owner")), await analytics.activity()


async def assert_invisible(scoped: TenantStore, tid: str, seen: Any, folder: Path) -> None:
    """No reader sees anything of the task `tid` of this tenant: the reads of the task
    raise NotFound, listings, reports (`seen`: as before the create) and a backup leave
    it out."""
    repo = scoped.tasks
    reads: list[Callable[[], Awaitable[Any]]] = [
        lambda: repo.get(tid), lambda: repo.messages(tid), lambda: repo.tail(tid, 3),
        lambda: repo.header(tid), lambda: repo.read_range(tid, 0, 1), lambda: repo.load(tid),
    ]  # fmt: skip
    for read in reads:
        with pytest.raises(NotFound):
            await read()
    assert tid not in [record.id for record in (await repo.list()).items]
    assert await reports(scoped) == seen
    key = task_key(scoped.tenant, tid)
    assert all(
        key not in keys for keys in (await backed_up(scoped.store, scoped.tenant, folder)).values()
    )


async def assert_complete(scoped: TenantStore, tid: str, memory: Task) -> None:
    """The task reads back as the in-memory one: messages, header, every page counted."""
    repo = scoped.tasks
    assert dicts(await repo.messages(tid)) == dicts(memory.messages)
    header = await repo.header(tid)
    assert without_paging(header) == memory.header
    assert dicts(await repo.tail(tid, 4)) == dicts(memory.messages[-4:])
    pages = await page_docs(scoped.store, scoped.tenant, tid)
    assert [page["page"] for page in pages] == list(range(header.pages))  # no stray page left
    document = await scoped.store.database["tasks"].find_one({"_id": task_key(scoped.tenant, tid)})
    assert document is not None and all(page["born"] == document["created_at"] for page in pages)


# ---------------------------------------------------------------------- one step, read back
@EXAMPLES
@given(ops=OPS, padding=st.integers(0, 14), policy=POLICIES)
async def test_a_long_history_is_created_in_one_step_and_reads_back_as_the_in_memory_task(
    store: Store, ops: list[Any], padding: int, policy: PagePolicy
) -> None:
    tenant = paged(store, policy)
    memory = await conversation(ops, padding)
    scoped = tenant()
    with store.backend.recorder.capture(payloads=True) as log:
        record = await scoped.tasks.create(task_id="T", messages=memory.messages, replay=True)
    assert record.seq == len(memory.messages)
    await assert_complete(scoped, "T", memory)
    header = await scoped.tasks.header("T")
    document = await store.database["tasks"].find_one({"_id": task_key(scoped.tenant, "T")})
    assert document is not None and document["version"] == 0  # one insert, no seal after it
    writes = [c for c in log if c.name in {"insert", "update", "delete"}]
    # the pages first (one upsert each), then the task document, last
    assert [c.collection for c in writes] == ["task_pages"] * header.pages + ["tasks"]
    # the cut is one seal's over the whole history: every full page, the rest left open
    pages = await page_docs(store, scoped.tenant, "T")
    stored = [m for page in pages for m in page["messages"]] + document["messages"]
    cuts = cut_pages([bson_size(m) for m in stored], first_index=0, first_page=0, policy=policy)
    if pages:
        assert [(p["start"], p["end"]) for p in pages] == [(c.start, c.end) for c in cuts]
        assert header.sealed_bytes == sum(page["size_bytes"] for page in pages)
        words = list(document["id_filter"])  # every sealed id held
        assert header.id_filter_words == len(words)
        assert all(id_filter.may_hold(words, m["id"]) for page in pages for m in page["messages"])
    else:  # not due for a seal: one document, as before paging
        assert not (cuts and should_seal(header, policy))
    # the same messages appended one by one are sealed at the same boundaries (a prefix:
    # a task grown by appends keeps up to two pages open)
    twin = tenant()
    await twin.tasks.create(task_id="T")
    for message in memory.messages:
        await twin.tasks.add_message("T", message.model_copy(deep=True))
    grown = await page_docs(store, twin.tenant, "T")
    if policy.page_bytes == 1 << 20:  # boundaries by count: independent of patched bytes
        assert [(p["start"], p["end"]) for p in grown] == [
            (p["start"], p["end"]) for p in pages[: len(grown)]
        ]
    # analytics and a backup see the whole history
    usage = await scoped.analytics.usage(group_by=("model",))
    assert sum(row.tokens_in for row in usage) == memory.header.usage.tokens_in


async def test_a_history_larger_than_a_document_is_one_insert_after_its_pages(
    store: Store,
) -> None:
    policy = PagePolicy(4, 300_000)
    repo = TaskRepository(store.database, "acme", offload_threshold=10**9,
                          max_document_bytes=1_000_000, page_policy=policy)  # fmt: skip
    memory = Task(id="big")
    for i in range(9):
        memory.add_human_message(f"{i}" * 200_000)
    writes = Writes()
    scope = repo.port.scope
    scope.tasks, scope.pages = Faulty(scope.tasks, writes), Faulty(scope.pages, writes)
    record = await repo.create(task_id="big", messages=memory.messages, replay=True)
    assert record.seq == 9 and (await repo.header("big")).pages >= 2
    pages = await page_docs(store, "acme", "big")
    assert writes.count == len(pages) + 1  # the pages, then the one insert
    assert dicts(await repo.messages("big")) == dicts(memory.messages)
    # a message that cannot fit in a document even alone: refused, nothing written
    before = await snapshot(store, "acme")
    huge = Task(id="huge")
    huge.add_human_message("small")
    huge.add_human_message("x" * 1_100_000)
    huge.add_human_message("small again")
    with pytest.raises(TaskTooLarge):
        await repo.create(task_id="huge", messages=huge.messages, replay=True)
    assert await snapshot(store, "acme") == before


@given(
    pads=st.lists(st.integers(0, 3000), min_size=1, max_size=40),
    policy=POLICIES,
    limit=st.sampled_from([200_000, 205_000, 16 * 1024 * 1024]),
)
def test_the_cut_is_contiguous_keeps_the_last_message_open_and_fits(
    pads: list[int], policy: PagePolicy, limit: int
) -> None:
    stored = [
        {"id": f"m{i}", "started_ts": 1000 + i, "pad": "x" * pad} for i, pad in enumerate(pads)
    ]
    sizes = [bson_size(message) for message in stored]
    header = TaskHeader(seq=len(stored), size_bytes=sum(sizes))
    try:
        cut = cut_history(
            "T", header, stored, policy=policy, head_bytes=500, max_document_bytes=limit
        )
    except TaskTooLarge:  # only when the last message alone does not fit, or a page does not
        # the last message, its array key, the header budget and the sealed-id filter
        filter_bytes = id_filter.words_for(len(sizes) - 1) * 16
        alone = sizes[-1] + 8 + HEADER_BUDGET_BYTES + filter_bytes + 500 > limit
        pages = cut_pages(sizes, first_index=0, first_page=0, policy=policy, force=True)
        too_large = [
            p for p in pages if p.size_bytes + 8 * (p.end - p.start) + PAGE_FIELDS_BYTES > limit
        ]
        assert alone or too_large
        return
    if cut is None:
        assert document_estimate(header) + 500 <= limit and not (
            should_seal(header, policy)
            and cut_pages(sizes, first_index=0, first_page=0, policy=policy)
        )
        return
    position = 0
    for number, (page, messages) in enumerate(zip(cut.cuts, cut.pages, strict=True)):
        assert (page.page, page.start) == (number, position) and page.end > page.start
        assert messages == stored[page.start : page.end]
        assert page.size_bytes == sum(sizes[page.start : page.end])
        position = page.end
    assert cut.open == stored[position:] and len(cut.open) >= 1  # the last message stays open
    assert cut.header.sealed == position and cut.header.pages == len(cut.cuts)
    assert cut.header.sealed_bytes == sum(sizes[:position])
    assert cut.header.id_filter_words == len(cut.id_filter)
    assert all(id_filter.may_hold(cut.id_filter, m["id"]) for m in stored[:position])
    assert document_estimate(cut.header) + 500 <= limit
    assert without_paging(cut.header) == header


# ---------------------------------------------------------------------- crashes at every write
@EXAMPLES
@given(ops=OPS, padding=st.integers(2, 12), policy=POLICIES, after=st.booleans())
async def test_a_create_cut_short_at_any_write_is_invisible_and_then_finished_or_rolled_back(
    store: Store, tmp_path: Path, ops: list[Any], padding: int, policy: PagePolicy, after: bool
) -> None:
    tenant = paged(store, policy)
    memory = await conversation(ops, padding)
    history = [m.model_copy(deep=True) for m in memory.messages]
    # the writes of one whole create, counted on a tenant of its own
    dry, counted = tenant(), Writes()
    wrap(dry, counted)
    await dry.tasks.create(task_id="T", messages=history, replay=True)
    assert counted.count >= 1
    # bystanders: another tenant, and another paged task in the crashing tenants
    other = tenant()
    await other.tasks.create(task_id="T", messages=history, replay=True)
    for k in range(counted.count):
        scoped = tenant()
        await scoped.tasks.create(task_id="N", messages=history, replay=True)  # a neighbour
        await scoped.tasks.add_human_message("N", "neighbour's own message", message_id="own")
        seen = await reports(scoped)
        kept = await snapshot(store, other.tenant)
        neighbour = await page_docs(store, scoped.tenant, "N")
        neighbour_messages = dicts(await scoped.tasks.messages("N"))
        writes = Writes(k, after=after)
        wrap(scoped, writes)
        with pytest.raises(Crash):
            await scoped.tasks.create(task_id="T", messages=history, replay=True)
        clean = store.scoped(scoped.tenant)  # the next process: no wrapper, no cache
        inserted = after and k == counted.count - 1  # the insert landed, its reply was lost
        if inserted:
            await assert_complete(clean, "T", memory)
            with pytest.raises(Conflict):  # a retry is refused as any create of a used id
                await clean.tasks.create(task_id="T", messages=history, replay=True)
            await assert_complete(clean, "T", memory)
        else:
            await assert_invisible(clean, "T", seen, tmp_path)
            if k % 2:  # the next create of the same id finishes it, over the orphan pages
                await clean.tasks.create(task_id="T", messages=history, replay=True)
                await assert_complete(clean, "T", memory)
            else:  # a repair rolls it back: its pages go, no other page does
                report = await clean.dialogs.repair(grace=timedelta(0))
                orphaned = report.get("removed_pages", [])
                assert all(page.startswith(task_key(clean.tenant, "T#")) for page in orphaned)
                assert await page_docs(store, clean.tenant, "T") == []
                await assert_invisible(clean, "T", seen, tmp_path)
        assert await page_docs(store, scoped.tenant, "N") == neighbour
        assert dicts(await clean.tasks.messages("N")) == neighbour_messages
        assert await snapshot(store, other.tenant) == kept


@EXAMPLES
@given(ops=OPS, padding=st.integers(2, 12), policy=POLICIES)
async def test_an_import_cut_short_at_any_write_is_invisible_and_a_second_import_finishes(
    store: Store, tmp_path: Path, ops: list[Any], padding: int, policy: PagePolicy
) -> None:
    tenant = paged(store, policy)
    memory = await conversation(ops, padding)
    dry, counted = tenant(), Writes()
    wrap(dry, counted)
    await dry.tasks.import_task(memory, owner="alice")
    for k in range(counted.count - 1):  # every write before the insert
        scoped = tenant()
        seen = await reports(scoped)
        wrap(scoped, Writes(k))
        with pytest.raises(Crash):
            await scoped.tasks.import_task(memory, owner="alice")
        clean = store.scoped(scoped.tenant)
        await assert_invisible(clean, "T", seen, tmp_path)
        await clean.tasks.import_task(memory, owner="alice")
        await assert_complete(clean, "T", memory)
        assert (await clean.tasks.get("T")).owner == "alice"


async def test_a_fork_of_a_long_history_cut_short_is_invisible_and_repair_removes_it(
    store: Store, tmp_path: Path
) -> None:
    tenant = paged(store, PagePolicy(3, 1 << 20))
    root_history = await conversation([], 20)
    dry, counted = tenant(), Writes()
    await dry.tasks.create(task_id="root", messages=root_history.messages, replay=True)
    wrap(dry, counted)
    await dry.dialogs.fork("root")
    assert counted.count >= 4  # pages, the child's insert, the node (and the root's node)
    for k in range(counted.count):
        scoped = tenant()
        await scoped.tasks.create(task_id="root", messages=root_history.messages, replay=True)
        seen = await reports(scoped)
        root_pages = await page_docs(store, scoped.tenant, "root")
        wrap(scoped, Writes(k))
        with pytest.raises(Crash):
            await scoped.dialogs.fork("root")
        clean = store.scoped(scoped.tenant)
        listed = [record.id for record in (await clean.tasks.list()).items]
        children = [tid for tid in listed if tid != "root"]
        assert await clean.dialogs.subtree_ids("root") == ["root"]  # no half-made child
        if not children:  # stopped before the child's insert: nothing of it is visible
            assert await reports(clean) == seen
            root = task_key(clean.tenant, "root")
            assert all(
                keys <= {root} for keys in (await backed_up(store, clean.tenant, tmp_path)).values()
            )
        report = await clean.dialogs.repair(grace=timedelta(0))
        # the child is finished (its insert landed) or its pages are gone with it
        assert report["finished"] == children
        pages = await store.database["task_pages"].find({"tenant": clean.tenant}).to_list(None)
        expected = root_pages + [
            p for c in children for p in await page_docs(store, clean.tenant, c)
        ]
        assert sorted(p["_id"] for p in pages) == sorted(p["_id"] for p in expected)
        assert await page_docs(store, clean.tenant, "root") == root_pages
        for finished in children:  # a finished child reads its whole copy
            copied = await clean.tasks.messages(finished)
            assert [m.id for m in copied] == [m.id for m in root_history.messages]
        child = await clean.dialogs.fork("root")  # and a fork works again
        assert len(await clean.tasks.messages(child.id)) == len(root_history.messages)


# ---------------------------------------------------------------------- what stands in the way
async def test_a_create_of_a_used_id_writes_no_page(store: Store) -> None:
    scoped = paged(store, PagePolicy(3, 1 << 20))()
    first = await conversation([], 12)
    await scoped.tasks.create(task_id="T", messages=first.messages, replay=True)
    before = await snapshot(store, scoped.tenant)
    second = await conversation([], 20)
    with pytest.raises(Conflict, match="already in use"):
        await scoped.tasks.create(task_id="T", messages=second.messages, replay=True)
    assert await snapshot(store, scoped.tenant) == before


async def test_pages_changed_before_the_insert_are_put_back_after_it(store: Store) -> None:
    """A sweep of pages without a task (retention) or a racing create of the same id got in
    between the pages and the insert: the create rewrites what is not its own."""
    scoped = paged(store, PagePolicy(3, 1 << 20))()
    memory = await conversation([], 14)
    key = task_key(scoped.tenant, "T")
    pages = store.database["task_pages"]
    repo = scoped.tasks
    real = repo.port.scope.tasks

    class Interfering:
        """The tasks collection, with a sweep and a racing create just before the insert."""

        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        async def insert_one(self, document: Any, *args: Any, **kwargs: Any) -> Any:
            await pages.delete_one({"_id": page_key(key, 0), "tenant": scoped.tenant})
            foreign = {"$set": {"born": "another create", "messages": []}}
            await pages.update_one({"_id": page_key(key, 1)}, foreign)
            return await real.insert_one(document, *args, **kwargs)

    repo.port.scope.tasks = Interfering()
    await repo.create(task_id="T", messages=memory.messages, replay=True)
    await assert_complete(store.scoped(scoped.tenant), "T", memory)


# ---------------------------------------------------------------------- repair
async def test_repair_removes_only_pages_no_task_counts(store: Store) -> None:
    tenant = paged(store, PagePolicy(3, 1 << 20))
    scoped, elsewhere = tenant(), tenant()
    memory = await conversation([], 14)
    for view in (scoped, elsewhere):
        await view.tasks.create(task_id="live", messages=memory.messages, replay=True)
    mark = (await scoped.tasks.header("live")).pages
    document = await store.database["tasks"].find_one({"_id": task_key(scoped.tenant, "live")})
    assert document is not None
    born = document["created_at"]
    live = task_key(scoped.tenant, "live")
    pages = store.database["task_pages"]
    template = (await page_docs(store, scoped.tenant, "live"))[0]

    def stray(task: str, number: int, born: Any) -> dict[str, Any]:
        return {**template, "_id": page_key(task, number), "task": task, "page": number,
                "born": born}  # fmt: skip

    strays = [
        stray(task_key(scoped.tenant, "gone"), 0, born),  # a crashed create's
        stray(live, mark + 1, "a deleted namesake"),  # past the mark, foreign born
    ]
    seal_under_way = stray(live, mark, born)  # past the mark, its own
    await pages.insert_many([*strays, seal_under_way])
    elsewhere_before = await snapshot(store, elsewhere.tenant)
    owner_view = store.scoped(scoped.tenant, owner="alice").dialogs
    assert "removed_pages" not in await owner_view.repair(grace=timedelta(0))
    assert "removed_pages" not in await scoped.dialogs.repair()  # younger than the grace
    with pytest.raises(ValidationError, match="grace"):
        await scoped.dialogs.repair(grace=timedelta(seconds=-1))
    with pytest.raises(ValidationError, match="grace"):
        await scoped.dialogs.repair(grace=3600)  # type: ignore[arg-type]
    report = await scoped.dialogs.repair(grace=timedelta(0))
    assert report["removed_pages"] == sorted(page["_id"] for page in strays)
    left = {page["_id"] for page in await pages.find({"tenant": scoped.tenant}).to_list(None)}
    assert left == {page_key(live, n) for n in range(mark + 1)}  # the seal's page kept
    assert await snapshot(store, elsewhere.tenant) == elsewhere_before
    assert "removed_pages" not in await scoped.dialogs.repair(grace=timedelta(0))


async def test_a_retried_create_of_a_shorter_history_leaves_pages_repair_removes(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    scoped = paged(store, PagePolicy(2, 1 << 20))()
    short = await conversation([], 7)
    long = extended(short, 16)  # the same first messages: a retry's
    wrap(scoped, Writes(5))  # the sixth page of the long history: five pages written
    with pytest.raises(Crash):
        await scoped.tasks.create(task_id="T", messages=long.messages, replay=True)
    clean = store.scoped(scoped.tenant)
    await clean.tasks.create(task_id="T", messages=short.messages, replay=True)
    now = base.CLOCK()  # both homes finish the previous message at the same millisecond
    monkeypatch.setattr(base, "CLOCK", lambda: now)
    await clean.tasks.add_human_message("T", "and on", message_id="more")
    short.add_human_message("and on", message_id="more")
    header = await clean.tasks.header("T")
    assert len(await page_docs(store, clean.tenant, "T")) == 5 > header.pages  # ignored
    assert dicts(await clean.tasks.messages("T")) == dicts(short.messages)
    report = await clean.dialogs.repair(grace=timedelta(0))
    assert len(report["removed_pages"]) == 5 - header.pages
    await assert_complete(clean, "T", short)


async def test_a_create_of_other_messages_does_not_take_a_stopped_create_s_pages_until_the_grace(
    store: Store, tmp_path: Path
) -> None:
    """Pages no task counts and younger than the grace may be a create still running: a
    create of other messages under that id is refused (`Conflict`, nothing written) until
    they are older than the grace or a repair removed them."""
    scoped = paged(store, PagePolicy(2, 1 << 20))()
    stopped, other = await conversation([], 12), await conversation([], 9)
    wrap(scoped, Writes(3))
    with pytest.raises(Crash):
        await scoped.tasks.create(task_id="T", messages=stopped.messages, replay=True)
    clean = store.scoped(scoped.tenant)
    before = await snapshot(store, clean.tenant)
    with pytest.raises(Conflict, match="another create of this id"):
        await clean.tasks.create(task_id="T", messages=other.messages, replay=True)
    assert await snapshot(store, clean.tenant) == before
    await assert_invisible(clean, "T", await reports(clean), tmp_path)
    [born] = {page["born"] for page in await page_docs(store, clean.tenant, "T")}
    old = born - ORPHAN_GRACE - timedelta(seconds=1)
    await store.database["task_pages"].update_many(
        {"tenant": clean.tenant}, {"$set": {"born": old}}
    )
    await clean.tasks.create(task_id="T", messages=other.messages, replay=True)  # an orphan now
    await assert_complete(clean, "T", other)


async def create_noting(
    scoped: TenantStore, history: Task, name: str, outcome: dict[str, BaseException | None]
) -> None:
    """Create task "T" with `history`, noting under `name` in `outcome` the `Conflict` it
    met, or None when it won."""
    try:
        await scoped.tasks.create(task_id="T", messages=history.messages, replay=True)
        outcome[name] = None
    except Conflict as exc:
        outcome[name] = exc


@pytest.mark.parametrize("same_millisecond", [False, True])
async def test_two_creates_of_one_id_racing_never_mix_their_pages(
    store: Store, monkeypatch: pytest.MonkeyPatch, same_millisecond: bool
) -> None:
    """Two creates of one id with other messages, on stores of their own: the second runs
    whole while the first is stopped before one of its writes (every write in turn). One
    of them gets `Conflict`; the task holds the other's history exactly, no page of the
    loser among its pages, whichever wrote first (and when both stamp the same `born`)."""
    if same_millisecond:
        import mindstore.repositories.task_lifecycle as tasks_module

        frozen = tasks_module.utcnow()
        monkeypatch.setattr(tasks_module, "utcnow", lambda: frozen)
    policy = PagePolicy(2, 1 << 20)
    first_history, second_history = await conversation([], 10), await conversation([], 7)
    counted = paged(store, policy)()
    probe = Writes()
    wrap(counted, probe)
    await counted.tasks.create(task_id="T", messages=first_history.messages, replay=True)
    for k in range(probe.count):  # pages, then the insert
        tenant = f"race{next(NAMES)}"
        first = Store(store.backend, page_policy=policy).scoped(tenant)
        second = Store(store.backend, page_policy=policy).scoped(tenant)
        outcome: dict[str, BaseException | None] = {}

        run_second = functools.partial(create_noting, second, second_history, "second", outcome)
        wrap(first, Writes(k, meanwhile=run_second))
        await create_noting(first, first_history, "first", outcome)
        winners = [name for name, error in outcome.items() if error is None]
        assert len(winners) == 1, (k, outcome)
        won = first_history if winners == ["first"] else second_history
        await assert_complete(store.scoped(tenant), "T", won)


async def test_a_create_past_its_deadline_writes_no_more_pages(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A create that took longer than half the grace stops before its next page, so pages
    younger than the grace are never a racing create's that could still be written over."""
    import mindstore.repositories.task_lifecycle as tasks_module

    scoped = paged(store, PagePolicy(2, 1 << 20))()
    before = await snapshot(store, scoped.tenant)
    monkeypatch.setattr(tasks_module, "create_deadline", lambda: float("-inf"))
    memory = await conversation([], 9)
    with pytest.raises(Conflict, match="took longer than"):
        await scoped.tasks.create(task_id="T", messages=memory.messages, replay=True)
    assert await snapshot(store, scoped.tenant) == before
