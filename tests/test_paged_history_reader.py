"""The paged-history reader (`mindstore.paged_history.PagedHistory`): a task's visible
pages in order, and the sealed messages its pending entries change, as committed.

Tasks are paged by the task repository's own seals (`paging_fixtures`); the reader's
answers are compared with what the repository itself reads.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import StoreFactory
from mindstore import PagePolicy, Store
from mindstore.backup import backup
from mindstore.documents import TASK_PAGES, TASKS
from mindstore.errors import BackupError
from mindstore.ids import task_id_of
from mindstore.paged_history import IncompleteHistory, PagedHistory, visible_ids
from mindstore.workload import Workload, WorkloadSpec, generate, load
from paging_fixtures import half_done_seal, seal_all, unfolded

WORKLOAD = generate(WorkloadSpec(tenants=2, owners_per_tenant=2, tasks=6, mean_messages=20, seed=5))
POLICY = PagePolicy(page_messages=3)


async def paged(stores: StoreFactory) -> Store:
    store = await stores.fresh(page_policy=None)
    await load(store, Workload(tasks=copy.deepcopy(WORKLOAD.tasks), nodes=[]))
    assert await seal_all(store, POLICY) >= 6
    return store


def history(store: Store) -> PagedHistory:
    return PagedHistory(store.database[TASKS], store.database[TASK_PAGES])


async def longest(store: Store, tenant: str = "tenant-0") -> dict[str, Any]:
    tasks = await store.database[TASKS].find({"tenant": tenant, "pages": {"$gt": 0}}).to_list(None)
    return max(tasks, key=lambda t: (t["pages"], t["_id"]))


@settings(max_examples=4, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(batch=st.integers(1, 5))
async def test_visible_pages_come_in_order_in_batches(stores: StoreFactory, batch: int) -> None:
    store = await paged(stores)
    task = await longest(store)
    ghosts = await half_done_seal(store, POLICY, task["_id"])  # past the mark: never read
    task = await store.database[TASKS].find_one({"_id": task["_id"]})
    assert ghosts and task is not None and task["pages"] >= 3
    batches = [b async for b in history(store).visible_pages(task, batch)]
    assert all(1 <= len(b) <= batch for b in batches)
    assert [p["_id"] for b in batches for p in b] == visible_ids(task)


@pytest.mark.parametrize("broken", ["missing", "newer"])
async def test_a_page_missing_or_newer_than_the_task_is_incomplete(
    stores: StoreFactory, broken: str
) -> None:
    store = await paged(stores)
    task = await longest(store)
    pages = store.database[TASK_PAGES]
    victim = {"_id": visible_ids(task)[1]}
    if broken == "missing":
        await pages.delete_one(victim)
    else:
        await pages.update_one(victim, {"$set": {"version": task["version"] + 1}})
    seen: list[str] = []
    with pytest.raises(IncompleteHistory, match="page 1 of"):
        async for batch in history(store).visible_pages(task, 1):
            seen += [p["_id"] for p in batch]
    assert seen == visible_ids(task)[:1]


async def test_a_backup_of_a_task_lacking_a_page_fails(tmp_path, stores: StoreFactory) -> None:
    store = await paged(stores)
    task = await longest(store)
    await store.database[TASK_PAGES].delete_one({"_id": visible_ids(task)[0]})
    with pytest.raises(BackupError, match="lacks"):
        await backup(store, tmp_path / "b")


async def test_patches_are_the_changed_sealed_messages_as_the_repository_reads_them(
    stores: StoreFactory,
) -> None:
    store = await paged(stores)
    reader = history(store)
    tenant = "tenant-0"
    assert await reader.patches(tenant, {"tenant": tenant}) == []  # no pending entry
    task = await longest(store, tenant)
    first = await store.database[TASK_PAGES].find_one({"_id": visible_ids(task)[0]})
    position, turn = next((n, m) for n, m in enumerate(first["messages"])
                          if m["role"] in ("user", "assistant"))  # fmt: skip
    tasks = store.scoped(tenant).tasks
    with unfolded(tasks):
        await tasks.redact(task_id_of(task["_id"]), turn["id"])
    patches = await reader.patches(tenant, {"tenant": tenant})
    assert [p.task for p in patches] == [task["_id"]]
    assert [m["id"] for m in patches[0].messages] == [turn["id"]]
    assert patches[0].messages[0] != turn  # the committed change, not the page's copy
    read = await tasks.messages(task_id_of(task["_id"]))
    assert read[position].id == turn["id"]
    assert read[position].to_dict()["redaction"] == patches[0].messages[0]["redaction"]
    other = "tenant-1"  # another tenant's query never reads this tenant's pending pages
    assert await reader.patches(other, {"tenant": other}) == []
