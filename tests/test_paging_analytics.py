"""Analytics over paged tasks: every report counts sealed pages and the open page once.

The same stored workload is reported on before and after its tasks are cut into pages
(raw writes in the paged stored shape, `paging_fixtures`); the reports must not change,
whatever the split points, filters and groupings. Half-done seals (a page at or past the
task's `pages` mark) are ignored, and pending changes to sealed messages are applied.
"""

from __future__ import annotations

import copy
import random
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mindstore
from mindstore.analytics.paging import merge_groups
from mindstore.documents import TASK_PAGES, TASKS
from mindstore.paged_history import apply_pending, page_ranges
from mindstore.pipelines import analytics_pages
from mindstore.workload import Workload, WorkloadSpec, generate, load
from paging_fixtures import add_invisible_page, page_all, page_task

SPEC = WorkloadSpec(tenants=1, owners_per_tenant=3, tasks=14, mean_messages=24, days=20,
                    tool_error_rate=0.3, fork_every=5, seed=7)  # fmt: skip
WORKLOAD = generate(SPEC)
TENANT = "tenant-0"


def _plain(value: Any) -> Any:
    """A report as comparable data: floats rounded (sums may add in another order)."""
    if hasattr(value, "model_dump"):
        value = value.model_dump()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float):
        return round(value, 6)
    return value


FILTERS: list[dict[str, Any]] = [
    {},
    {"since": "2026-10-05", "until": "2026-10-15"},
    {"owner": "tenant-0-user-1"},
    {"state": "completed", "period": "week"},
]


async def reports(view: Any) -> dict[str, Any]:
    """Every report, over a few filter combinations and groupings."""
    out: dict[str, Any] = {}
    a = view.analytics
    for n, f in enumerate(FILTERS):
        kw = {k: v for k, v in f.items() if k != "period"}
        period = f.get("period")
        out[f"usage{n}"] = await a.usage(group_by=("model", "owner"), period=period, **kw)
        out[f"owners{n}"] = await a.top_owners(limit=2, by="tokens_in", **kw)
        out[f"latency{n}"] = await a.latency(group_by=("owner",), period=period, **kw)
        out[f"tools{n}"] = await a.tools(group_by=("model",), period=period, **kw)
        out[f"sessions{n}"] = await a.sessions(**kw)
        out[f"subtasks{n}"] = await a.subtasks(**kw)
        out[f"activity{n}"] = await a.activity(period=period or "day", **kw)
        out[f"active{n}"] = await a.active_owners(period=period or "day", **kw)
    return _plain(out)


async def fresh_store() -> Any:
    store = await mindstore.connect("embedded", database=f"paging_{uuid.uuid4().hex[:8]}")
    await load(
        store, Workload(tasks=copy.deepcopy(WORKLOAD.tasks), nodes=copy.deepcopy(WORKLOAD.nodes))
    )
    return store


@pytest.fixture(scope="module")
def unpaged_reports() -> dict[str, Any]:
    import asyncio

    async def run() -> dict[str, Any]:
        store = await fresh_store()
        try:
            return await reports(store.scoped(TENANT))
        finally:
            await store.close()

    return asyncio.run(run())


async def test_paging_every_task_changes_no_report(unpaged_reports):
    store = await fresh_store()
    try:
        assert await page_all(store.database, TENANT, random.Random(1)) >= 10
        assert await store.database[TASK_PAGES].count_documents({}) >= 10
        assert await reports(store.scoped(TENANT)) == unpaged_reports
    finally:
        await store.close()


@settings(
    max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(seed=st.integers(0, 10_000), share=st.sampled_from([0.3, 1.0]))
async def test_reports_do_not_depend_on_split_points(unpaged_reports, seed, share):
    store = await fresh_store()
    try:
        await page_all(store.database, TENANT, random.Random(seed), share=share)
        assert await reports(store.scoped(TENANT)) == unpaged_reports
    finally:
        await store.close()


async def test_every_message_sealed_leaves_an_empty_open_page(unpaged_reports):
    store = await fresh_store()
    try:
        tasks = await store.database[TASKS].find({"tenant": TENANT}).to_list(None)
        for task in tasks:
            n = len(task["messages"])
            if n:
                await page_task(store.database, task["_id"], sorted({max(1, n // 2), n}))
        assert (
            await store.database[TASKS].count_documents(
                {"tenant": TENANT, "messages.0": {"$exists": True}}
            )
            == 0
        )
        assert await reports(store.scoped(TENANT)) == unpaged_reports
    finally:
        await store.close()


async def test_a_half_done_seal_is_not_counted(unpaged_reports):
    store = await fresh_store()
    try:
        await page_all(store.database, TENANT, random.Random(3))
        tasks = (
            await store.database[TASKS].find({"tenant": TENANT, "pages": {"$gt": 0}}).to_list(None)
        )
        for task in tasks:
            if task["messages"]:
                # the open page written as the next page, but the task never counted it
                await add_invisible_page(store.database, task["_id"], task["messages"])
        assert await reports(store.scoped(TENANT)) == unpaged_reports
    finally:
        await store.close()


async def test_pending_changes_to_sealed_messages_are_applied(unpaged_reports):
    """A sealed assistant turn whose usage and finish were changed after the seal: the
    page still holds the old values, the task's pending list the committed ones."""
    store = await fresh_store()
    db = store.database
    try:
        await page_all(db, TENANT, random.Random(5))
        changed = 0
        for task in await db[TASKS].find({"tenant": TENANT, "pages": {"$gt": 0}}).to_list(None):
            pages = await db[TASK_PAGES].find({"task": task["_id"]}).sort("page", 1).to_list(None)
            pending = []
            for page in pages:
                for position, message in enumerate(page["messages"]):
                    if message.get("role") == "assistant" and "finished_ts" in message:
                        index = page["start"] + position
                        pending.append({"id": message["id"], "i": index, "p": "finished_ts",
                                        "v": message["finished_ts"]})  # fmt: skip
                        for key, value in message.items():
                            if key in ("tokens_in", "cost", "usage"):
                                pending.append(
                                    {"id": message["id"], "i": index, "p": key, "v": value}
                                )
                        stale = {"finished_ts": None, "tokens_in": 0, "cost": 0.0}
                        await db[TASK_PAGES].update_one(
                            {"_id": page["_id"]},
                            {"$set": {f"messages.{position}.{k}": v for k, v in stale.items()},
                             "$unset": {f"messages.{position}.usage": ""}},
                        )  # fmt: skip
                        changed += 1
                        break
            if pending:
                await db[TASKS].update_one({"_id": task["_id"]}, {"$set": {"pending": pending}})
        assert changed >= 5
        assert await reports(store.scoped(TENANT)) == unpaged_reports
    finally:
        await store.close()


async def test_pages_of_another_tenant_are_not_read():
    spec = WorkloadSpec(tenants=2, owners_per_tenant=2, tasks=8, mean_messages=12, seed=2)
    store = await mindstore.connect("embedded", database=f"paging_{uuid.uuid4().hex[:8]}")
    try:
        await load(store, generate(spec))
        before = _plain(await store.scoped("tenant-1").analytics.usage(group_by=("owner",)))
        await page_all(store.database, "tenant-0", random.Random(0))
        # a forged page of tenant-0 naming a tenant-1 task is not tenant-1's history
        victim = await store.database[TASKS].find_one({"tenant": "tenant-1"})
        page, _ = (await store.database[TASK_PAGES].find_one({"tenant": "tenant-0"})), None
        forged = dict(page, _id=victim["_id"] + "#0", task=victim["_id"], page=0)
        await store.database[TASK_PAGES].insert_one(forged)
        assert _plain(await store.scoped("tenant-1").analytics.usage(group_by=("owner",))) == before
    finally:
        await store.close()


# ------------------------------------------------------------------ pure pieces
def test_page_ranges_skip_the_given_pages():
    assert page_ranges(5) == [(0, 5)]
    assert page_ranges(5, [0, 2, 4]) == [(1, 2), (3, 4)]
    assert page_ranges(3, [7, -1]) == [(0, 3)]
    assert page_ranges(0) == []


def test_apply_pending_sets_and_removes_fields_in_order():
    messages = [
        {"id": "a", "content": [{"type": "toolCall", "answered": False}]},
        {"id": "b", "x": 1},
    ]
    task = {"pending": [
        {"id": "a", "i": 10, "p": "content.0.answered", "v": True},
        {"id": "b", "i": 11, "p": "x"},
        {"id": "b", "i": 11, "p": "y.z", "v": 2},
        {"id": "zz", "i": 10, "p": "content", "v": []},  # another message's id: skipped
        {"id": "a", "i": 3, "p": "content", "v": []},  # outside this page
    ]}  # fmt: skip
    patched, touched = apply_pending(messages, 10, task)
    assert patched == [
        {"id": "a", "content": [{"type": "toolCall", "answered": True}]},
        {"id": "b", "y": {"z": 2}},
    ]
    assert touched == [0, 1]
    assert messages[0]["content"][0]["answered"] is False  # the input is not changed
    assert apply_pending(patched, 10, task)[0] == patched  # idempotent


def test_merge_groups_combines_by_accumulator():
    group = {"_id": {"t": "$_id"}, "n": {"$sum": 1}, "hi": {"$max": "$x"}, "lo": {"$min": "$x"}}
    rows = [{"_id": {"t": "a"}, "n": 2, "hi": 5, "lo": None}, {"_id": {"t": "a"}, "n": 3, "hi": None, "lo": 1},
            {"_id": {"t": "b", "missing": None}, "n": 1, "hi": "s", "lo": 4}, {"_id": {"t": "b"}, "n": 1, "hi": 9, "lo": 2}]  # fmt: skip
    merged = {row["_id"]["t"]: row for row in merge_groups(rows, group)}
    assert merged["a"]["n"] == 5 and merged["a"]["hi"] == 5 and merged["a"]["lo"] == 1
    assert (
        merged["b"]["n"] == 2 and merged["b"]["hi"] == "s" and merged["b"]["lo"] == 2
    )  # BSON order
    with pytest.raises(ValueError, match="avg"):
        merge_groups(rows, {"_id": 1, "avg": {"$avg": "$x"}})


def test_split_units_keeps_the_tail_apart():
    pipeline = [{"$match": {"tenant": "t"}}, {"$group": {"_id": 1}}, {"$group": {"_id": 2}},
                {"$sort": {"a": 1}}, {"$limit": 3}]  # fmt: skip
    units, rollup, tail = analytics_pages.split_units(pipeline)
    assert units == pipeline[:2] and rollup == pipeline[2:3] and tail == pipeline[3:]
    query = analytics_pages.paged_tasks_query(
        [{"$match": {"tenant": "t", "messages.started_ts": {"$gte": 1}}}]
    )
    assert query == {"tenant": "t", "pages": {"$gt": 0}}
