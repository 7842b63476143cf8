"""Backup, verify, restore and erase of paged tasks (sealed pages in `task_pages`).

Paged tasks are paged by the task repository's own seals (`paging_fixtures`) from data
written through the store (workload tasks with sub-tasks and tool calls, dialogs with
offloaded payloads, small page policies); the backup of such data is format 2,
round-trips byte for byte, and every break of page continuity is a typed problem that
stops restore before it writes.
"""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import bson
import pytest

from conftest import StoreFactory
from mindstore import PagePolicy, Store
from mindstore.backup import BackupCorrupt, backup, erase, restore, verify
from mindstore.backup.pages import PageContinuityError
from mindstore.backup.retention import erase_before
from mindstore.documents import DIALOG_NODES, PAYLOADS, TASK_PAGES, TASKS
from mindstore.ids import task_id_of
from mindstore.workload import Workload, WorkloadSpec, generate, load
from paging_fixtures import half_done_seal, seal_all, unfolded
from test_backup_support import read_file_records, resign, rewrite_file, seed

ALL = (TASK_PAGES, TASKS, DIALOG_NODES, PAYLOADS)
WORKLOAD = generate(WorkloadSpec(tenants=1, owners_per_tenant=2, tasks=6, mean_messages=20, seed=4))
POLICIES = {1: PagePolicy(page_messages=3), 2: PagePolicy(page_messages=4, page_bytes=900)}


async def dump(store: Any) -> dict[str, list[bytes]]:
    out = {}
    for name in ALL:
        docs = await store.database[name].find({}).to_list()
        raws = (bson.encode(d) for d in docs)
        out[name] = sorted(raws, key=lambda raw: repr(bson.decode(raw)["_id"]))
    return out


async def paged_store(stores: StoreFactory, seed_value: int = 1) -> Store:
    """Workload tasks (sub-tasks, tool calls) and dialogs with payloads, paged by seals."""
    policy = POLICIES[seed_value]
    store = await stores.fresh(page_policy=policy)
    await load(store, copy.deepcopy(WORKLOAD))
    await seed(store, (("tenant-0", ("alice", "bob")),), messages=6)  # paged as written
    assert await seal_all(store, policy) >= 6
    return store


@pytest.fixture
async def paged_backup(tmp_path: Path, stores: StoreFactory) -> Path:
    store = await paged_store(stores)
    path = tmp_path / "paged"
    await backup(store, path, tenant="tenant-0")
    return path


def _copy(path: Path, name: str) -> Path:
    target = path.parent / name
    shutil.copytree(path, target)
    return target


async def _refused(stores: StoreFactory, path: Path, problem: str | None,
                   match: str | None = None) -> None:  # fmt: skip
    error = PageContinuityError if problem else BackupCorrupt
    with pytest.raises(error, match=match) as caught:
        await verify(path)
    assert caught.value.exit_code == 10
    if problem:
        assert caught.value.problem == problem
    target = await stores.fresh()
    with pytest.raises(error):
        await restore(target, path)
    assert await dump(target) == {name: [] for name in ALL}  # nothing written


@pytest.mark.parametrize("seed_value", [1, 2])
async def test_paged_tasks_round_trip_byte_for_byte(tmp_path, stores, seed_value):
    source = await paged_store(stores, seed_value)
    before = await dump(source)
    manifest = await backup(source, tmp_path / "b")
    assert manifest.format_version == 2
    assert manifest.counts[TASK_PAGES] == len(before[TASK_PAGES]) > 0
    total = sum(len(bson.decode(t).get("messages", [])) for t in before[TASKS])
    total += sum(len(bson.decode(p)["messages"]) for p in before[TASK_PAGES])
    report = await verify(tmp_path / "b")
    assert report.messages == manifest.messages == total
    target = await stores.fresh()
    result = await restore(target, tmp_path / "b")
    assert result.counts[TASK_PAGES]["inserted"] == len(before[TASK_PAGES])
    assert await dump(target) == before
    again = await restore(target, tmp_path / "b", mode="overwrite")  # idempotent
    assert again.written == 0 and await dump(target) == before
    # the restored paged tasks read back as the source's (analytics over pages)
    sessions = [await s.scoped("tenant-0").analytics.sessions() for s in (target, source)]
    assert sessions[0] == sessions[1]
    for task in await source.database[TASKS].find({"pages": {"$gt": 0}}).to_list():  # and reads
        tenant, task_id = task["tenant"], task_id_of(task["_id"])
        read = [m.to_dict() for m in await target.scoped(tenant).tasks.messages(task_id)]
        assert read == [m.to_dict() for m in await source.scoped(tenant).tasks.messages(task_id)]


async def test_a_backup_without_pages_is_format_1_and_restores(tmp_path, stores):
    store = await stores.fresh(page_policy=None)
    await seed(store)
    manifest = await backup(store, tmp_path / "old")
    assert manifest.format_version == 1 and TASK_PAGES not in manifest.counts
    assert not (tmp_path / "old" / "task_pages.jsonl.gz").exists()
    target = await stores.fresh()
    result = await restore(target, tmp_path / "old")
    stored = await store.database[TASKS].count_documents({})
    assert TASK_PAGES not in result.counts and result.counts[TASKS]["inserted"] == stored == 5
    assert await dump(target) == await dump(store)


async def test_half_done_seals_are_left_out(tmp_path, stores):
    store = await paged_store(stores)
    task = await store.database[TASKS].find_one({"pages": {"$gt": 0}})
    ghosts = await half_done_seal(store, POLICIES[1], task["_id"])
    manifest = await backup(store, tmp_path / "b")
    pages = read_file_records(tmp_path / "b" / "task_pages.jsonl.gz")
    assert not {g["_id"] for g in ghosts} & {p["_id"] for p in pages}
    total = await store.database[TASK_PAGES].count_documents({})
    assert manifest.counts[TASK_PAGES] == total - len(ghosts) == len(pages)
    await verify(tmp_path / "b")


async def test_pending_changes_are_folded_into_the_backup(tmp_path, stores):
    """Text added to a sealed assistant turn while the fold into its page fails: the page
    holds the old turn, the task's `pending` list the change; the backup holds the page
    with the change folded in (sizes to match) and no pending list, and restores to the
    same reads."""
    store = await paged_store(stores)
    db = store.database
    page = next(p for p in await db[TASK_PAGES].find({"tenant": "tenant-0"}).sort("_id").to_list()
                if any(m["role"] == "assistant" for m in p["messages"]))  # fmt: skip
    position, message = next(
        (n, m) for n, m in enumerate(page["messages"]) if m["role"] == "assistant"
    )
    tasks = store.scoped("tenant-0").tasks
    task_id = task_id_of(page["task"])
    with unfolded(tasks):
        await tasks.add_text_part(task_id, message["id"], " (added late)")
    task = await db[TASKS].find_one({"_id": page["task"]})
    assert task["pending"] and await db[TASK_PAGES].find_one({"_id": page["_id"]}) == page
    committed = await tasks.get_message(task_id, message["id"])
    assert committed.text().endswith(" (added late)")
    await backup(store, tmp_path / "b")
    await verify(tmp_path / "b")
    pages = {p["_id"]: p for p in read_file_records(tmp_path / "b" / "task_pages.jsonl.gz")}
    records = {t["_id"]: t for t in read_file_records(tmp_path / "b" / "tasks.jsonl.gz")}
    folded = pages[page["_id"]]["messages"][position]
    assert folded["content"][-1]["text"].endswith(" (added late)")
    grown = len(bson.encode(folded)) - len(bson.encode(message))
    assert grown > 0 and pages[page["_id"]]["size_bytes"] == page["size_bytes"] + grown
    assert records[task["_id"]]["pending"] == []
    # the verb counted the change in `sealed_bytes` already; the pages catch up in the backup
    visible = {"task": page["task"], "page": {"$lt": task["pages"]}}
    stored_pages = await db[TASK_PAGES].find(visible).to_list()
    assert task["sealed_bytes"] == sum(p["size_bytes"] for p in stored_pages) + grown
    backed_up = sum(p["size_bytes"] for p in pages.values() if p["task"] == page["task"])
    assert records[task["_id"]]["sealed_bytes"] == task["sealed_bytes"] == backed_up
    target = await stores.fresh()
    await restore(target, tmp_path / "b")
    restored = await target.scoped("tenant-0").tasks.get_message(task_id, message["id"])
    assert restored.to_dict() == committed.to_dict()


# --------------------------------------------------------------------------- continuity
def _pages(path: Path) -> list[dict[str, Any]]:
    return read_file_records(path / "task_pages.jsonl.gz")


def _multi(pages: list[dict[str, Any]]) -> str:
    """A task with at least two pages."""
    counts: dict[str, int] = {}
    for page in pages:
        counts[page["task"]] = counts.get(page["task"], 0) + 1
    return next(task for task, n in sorted(counts.items()) if n >= 2)


async def test_verify_passes_the_good_backup(paged_backup):
    report = await verify(paged_backup)
    assert report.counts[TASK_PAGES] == len(_pages(paged_backup))


async def test_a_missing_page_is_refused(paged_backup, stores):
    path = _copy(paged_backup, "missing")
    pages = _pages(path)
    task = _multi(pages)
    rewrite_file(path, TASK_PAGES, [p for p in pages if not (p["task"] == task and p["page"] == 0)])
    await _refused(stores, path, "missing", "page 1 where page 0")
    last = _copy(paged_backup, "missing-last")
    numbers = [p["page"] for p in pages if p["task"] == task]
    rewrite_file(
        last,
        TASK_PAGES,
        [p for p in pages if not (p["task"] == task and p["page"] == max(numbers))],
    )
    await _refused(stores, last, "missing", "counts")


async def test_a_gap_and_an_overlap_are_refused(paged_backup, stores):
    pages = _pages(paged_backup)
    task = _multi(pages)
    for shift, problem in ((1, "gap"), (-1, "overlap")):
        path = _copy(paged_backup, problem)
        edited = [dict(p, start=p["start"] + shift, end=p["end"] + shift)
                  if p["task"] == task and p["page"] == 1 else p for p in pages]  # fmt: skip
        rewrite_file(path, TASK_PAGES, edited)
        await _refused(stores, path, problem, "starts at message")


async def test_a_duplicate_page_and_pages_out_of_order_are_refused(paged_backup, stores):
    pages = _pages(paged_backup)
    task = _multi(pages)
    path = _copy(paged_backup, "duplicate")
    first = next(p for p in pages if p["task"] == task and p["page"] == 0)
    at = pages.index(first)
    rewrite_file(path, TASK_PAGES, [*pages[: at + 1], first, *pages[at + 1 :]])
    await _refused(stores, path, "duplicate")
    swapped = _copy(paged_backup, "swapped")
    mine = [p for p in pages if p["task"] == task]
    others = [p for p in pages if p["task"] != task]
    rewrite_file(swapped, TASK_PAGES, [*others, mine[1], mine[0], *mine[2:]])
    await _refused(stores, swapped, "missing")


async def test_task_marks_that_disagree_with_its_pages_are_refused(paged_backup, stores):
    tasks = read_file_records(paged_backup / "tasks.jsonl.gz")
    paged = next(t for t in tasks if t.get("pages"))
    cases = [
        ({"pages": paged["pages"] + 1}, "missing"),
        ({"pages": paged["pages"] - 1}, "extra"),
        ({"sealed": paged["sealed"] + 1}, "gap"),
        ({"sealed_bytes": paged["sealed_bytes"] + 7}, "size"),
        ({"pending": [{"id": "m", "i": 0, "p": "title", "v": "x"}]}, "pending"),
    ]
    for n, (change, problem) in enumerate(cases):
        path = _copy(paged_backup, f"marks-{n}")
        edited = [dict(t, **change) if t["_id"] == paged["_id"] else t for t in tasks]
        rewrite_file(path, TASKS, edited)
        await _refused(stores, path, problem)


async def test_an_orphan_page_is_refused(paged_backup, stores):
    pages = _pages(paged_backup)
    path = _copy(paged_backup, "orphan")
    stray = dict(pages[0], task="tenant-0/nobody", _id="tenant-0/nobody#0", page=0)
    stray["start"], stray["end"] = 0, len(stray["messages"])
    rewrite_file(path, TASK_PAGES, [*pages, stray])
    await _refused(stores, path, "orphan")


async def test_an_edited_sealed_message_breaks_the_header(paged_backup, stores):
    pages = _pages(paged_backup)
    path = _copy(paged_backup, "edited")
    target = next(i for i, p in enumerate(pages)
                  if any(m.get("role") == "assistant" for m in p["messages"]))  # fmt: skip
    page = copy.deepcopy(pages[target])
    for message in page["messages"]:
        if message.get("role") == "assistant":
            message["role"] = "user"
            break
    rewrite_file(path, TASK_PAGES, [*pages[:target], page, *pages[target + 1 :]])
    await _refused(stores, path, None)


async def test_a_page_of_another_tenant_or_a_forged_id_is_refused(paged_backup, stores):
    pages = _pages(paged_backup)
    path = _copy(paged_backup, "forged")
    rewrite_file(path, TASK_PAGES, [dict(pages[0], _id={"$gt": ""}), *pages[1:]])
    await _refused(stores, path, None, "page _id")
    other = _copy(paged_backup, "tenant")
    foreign = dict(pages[0], task="beta/" + pages[0]["task"].split("/", 1)[1])
    rewrite_file(other, TASK_PAGES, [foreign, *pages[1:]])
    await _refused(stores, other, None, "tenant")


async def test_old_format_manifests_must_not_list_pages(paged_backup):
    import json

    path = _copy(paged_backup, "v1-with-pages")
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["format_version"] = 1
    resign(path, manifest)
    with pytest.raises(BackupCorrupt, match="format 1"):
        await verify(path)


# --------------------------------------------------------------------------- restore modes
async def test_restore_modes_and_as_tenant_keep_pages_with_their_task(paged_backup, stores):
    target = await stores.fresh()
    moved = await restore(target, paged_backup, as_tenant="copy")
    pages = await target.database[TASK_PAGES].find({}).to_list()
    assert pages and all(p["tenant"] == "copy" and p["task"].startswith("copy/") for p in pages)
    assert all(p["_id"] == f"{p['task']}#{p['page']}" for p in pages)
    assert moved.counts[TASK_PAGES]["inserted"] == len(pages)
    # a leftover page (no task) under a backup page's id is overwritten; a stored task
    # keeps its own pages in mode skip
    first = _pages(paged_backup)[0]
    await target.database[TASK_PAGES].insert_one(dict(first, messages=[], end=first["start"]))
    result = await restore(target, paged_backup, mode="skip")
    stored = await target.database[TASK_PAGES].find_one({"_id": first["_id"]})
    assert bson.encode(stored) == bson.encode(first)
    assert result.counts[TASK_PAGES]["overwritten"] == 1
    tasks = await target.database[TASKS].find({"tenant": "tenant-0"}, {"_id": 1}).to_list()
    assert tasks
    again = await restore(target, paged_backup, mode="skip")
    assert again.counts[TASK_PAGES]["skipped"] == len(_pages(paged_backup)) and again.written == 0


# --------------------------------------------------------------------------- erase
async def test_erase_deletes_a_tasks_pages_and_nothing_else(stores):
    store = await paged_store(stores)
    db = store.database
    # another tenant with pages of its own
    spec = WorkloadSpec(tenants=2, owners_per_tenant=1, tasks=4, mean_messages=10, seed=9)
    extra = [t for t in generate(spec).tasks if t["tenant"] == "tenant-1"]
    await load(store, Workload(tasks=extra, nodes=[]))
    await seal_all(store, POLICIES[1], "tenant-1")
    theirs = await db[TASK_PAGES].count_documents({"tenant": "tenant-1"})
    assert theirs > 0
    task = await db[TASKS].find_one({"tenant": "tenant-0", "pages": {"$gt": 1}})
    await half_done_seal(store, POLICIES[1], task["_id"])  # pages past the mark go too
    owner = task.get("owner")
    mine = {"tenant": "tenant-0", "owner": owner}
    owned = [t["_id"] for t in await db[TASKS].find(mine).to_list()]
    expected = await db[TASK_PAGES].count_documents({"tenant": "tenant-0", "task": {"$in": owned}})
    dry = await erase(store, "tenant-0", owner=owner, dry_run=True)
    assert dry.counts[TASK_PAGES] == expected
    receipt = await erase(store, "tenant-0", owner=owner)
    assert receipt.counts[TASK_PAGES] == expected and receipt.ids_sha256 == dry.ids_sha256
    assert await db[TASK_PAGES].count_documents({"task": {"$in": owned}}) == 0
    left = await db[TASK_PAGES].count_documents({"tenant": "tenant-0"})
    assert left > 0  # the other owner's
    whole = await erase(store, "tenant-0")
    assert whole.counts[TASK_PAGES] == left
    assert await db[TASK_PAGES].count_documents({"tenant": "tenant-0"}) == 0
    assert await db[TASK_PAGES].count_documents({"tenant": "tenant-1"}) == theirs


async def test_retention_deletes_pages_with_their_tasks(stores):
    store = await paged_store(stores)
    db = store.database
    total = await db[TASK_PAGES].count_documents({"tenant": "tenant-0"})
    # an interrupted sweep's leftover: a page whose task is gone
    task = await db[TASKS].find_one({"tenant": "tenant-0", "pages": {"$gt": 0}})
    await db[TASKS].delete_one({"_id": task["_id"]})
    receipt = await erase_before(store, "tenant-0", before="2100-01-01")
    assert receipt.counts[TASK_PAGES] == total
    assert await db[TASK_PAGES].count_documents({}) == 0


async def test_erasing_a_single_paged_task(stores):
    store = await paged_store(stores)
    db = store.database
    task = await db[TASKS].find_one({"tenant": "tenant-0", "pages": {"$gt": 0}})
    bare = task["_id"].split("/", 1)[1]
    mine = await db[TASK_PAGES].count_documents({"task": task["_id"]})
    others = await db[TASK_PAGES].count_documents({"task": {"$ne": task["_id"]}})
    receipt = await erase(store, "tenant-0", task_id=bare)
    assert receipt.counts[TASK_PAGES] == mine
    assert await db[TASK_PAGES].count_documents({"task": task["_id"]}) == 0
    assert await db[TASK_PAGES].count_documents({}) == others
