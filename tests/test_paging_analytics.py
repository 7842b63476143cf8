"""Analytics over paged tasks: every report counts sealed pages and the open page once.

The same stored workload is reported on before and after its tasks are paged by the
task repository's own seals (`paging_fixtures.seal_all`, with small page policies); the
reports must not change, whatever the page size, filters and groupings. Half-done seals
(pages past the task's `pages` mark) are ignored, pending changes to sealed messages are
applied, and another tenant's pages are never read.
"""

from __future__ import annotations

import copy
from contextlib import nullcontext
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import StoreFactory
from mindstore import PagePolicy, Store
from mindstore.analytics.paging import merge_groups
from mindstore.documents import TASK_PAGES, TASKS
from mindstore.ids import task_id_of
from mindstore.paged_history import apply_pending, page_ranges
from mindstore.pipelines import analytics_pages
from mindstore.workload import Workload, WorkloadSpec, generate, load
from paging_fixtures import half_done_seal, seal_all, unfolded

SPEC = WorkloadSpec(tenants=1, owners_per_tenant=3, tasks=14, mean_messages=24, days=20,
                    tool_error_rate=0.3, fork_every=5, seed=7)  # fmt: skip
WORKLOAD = generate(SPEC)
TENANT = "tenant-0"
SMALL = PagePolicy(page_messages=5)


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


async def loaded(stores: StoreFactory, workload: Workload = WORKLOAD) -> Store:
    """A store holding the workload as inserted (no task paged yet)."""
    store = await stores.fresh(page_policy=None)
    await load(
        store, Workload(tasks=copy.deepcopy(workload.tasks), nodes=copy.deepcopy(workload.nodes))
    )
    return store


_REFERENCE: dict[str, dict[str, Any]] = {}


@pytest.fixture
async def unpaged_reports(stores: StoreFactory) -> dict[str, Any]:
    """The reports on the workload never paged (computed once per session)."""
    return await _unpaged(stores)


async def paged_count(store: Store) -> int:
    return int(await store.database[TASKS].count_documents({"pages": {"$gt": 0}}))


async def test_paging_every_task_changes_no_report(
    stores: StoreFactory, unpaged_reports: dict[str, Any]
) -> None:
    store = await loaded(stores)
    assert await seal_all(store, SMALL, TENANT) >= 10
    assert await store.database[TASK_PAGES].count_documents({}) >= 30
    assert await reports(store.scoped(TENANT)) == unpaged_reports


@settings(
    max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    messages=st.integers(1, 8),
    page_bytes=st.sampled_from([600, 2000, 1024 * 1024]),
    share=st.sampled_from([0.3, 1.0]),
)
async def test_reports_do_not_depend_on_page_size_or_which_tasks_are_paged(
    stores: StoreFactory, unpaged_reports: dict[str, Any], messages: int, page_bytes: int,
    share: float,
) -> None:  # fmt: skip
    store = await loaded(stores)
    tasks = sorted(t["_id"] for t in WORKLOAD.tasks)
    chosen = tasks[: max(1, round(len(tasks) * share))]
    await seal_all(store, PagePolicy(page_messages=messages, page_bytes=page_bytes), keys=chosen)
    assert await paged_count(store) >= 1
    assert await reports(store.scoped(TENANT)) == unpaged_reports


async def test_every_message_sealed_leaves_an_empty_open_page(
    stores: StoreFactory, unpaged_reports: dict[str, Any]
) -> None:
    """Pages of one message: each task's open page ends up empty (every message sealed)."""
    store = await loaded(stores)
    assert await seal_all(store, PagePolicy(page_messages=1), TENANT) == len(WORKLOAD.tasks)
    held = {"tenant": TENANT, "messages.0": {"$exists": True}}
    assert await store.database[TASKS].count_documents(held) == 0
    assert await reports(store.scoped(TENANT)) == unpaged_reports


async def test_a_half_done_seal_is_not_counted(
    stores: StoreFactory, unpaged_reports: dict[str, Any]
) -> None:
    store = await loaded(stores)
    await seal_all(store, SMALL, TENANT)
    left = 0
    for task in await store.database[TASKS].find({"pages": {"$gt": 0}}).to_list(None):
        left += len(await half_done_seal(store, SMALL, task["_id"]))
    assert left >= 10  # pages past the mark, holding messages that are in the open page
    assert await reports(store.scoped(TENANT)) == unpaged_reports


async def test_pending_changes_to_sealed_messages_are_applied(stores: StoreFactory) -> None:
    """Sealed assistant turns finished again with new usage while the fold into their
    pages fails: the pages keep the old usage, the task's `pending` list holds the
    committed one. Reports equal those of the unpaged workload given the same verbs."""
    paged, plain = await loaded(stores), await loaded(stores)
    await seal_all(paged, SMALL, TENANT)
    turns = []  # the first sealed assistant turn of each paged task
    for page in await paged.database[TASK_PAGES].find({"page": 0}).sort("_id").to_list(None):
        turn = next((m for m in page["messages"] if m["role"] == "assistant"), None)
        if turn is not None:
            turns.append((page["task"], turn["id"], turn.get("tokens_in")))
    assert len(turns) >= 5
    for store, fold_fails in ((paged, True), (plain, False)):
        tasks = store.scoped(TENANT).tasks
        for key, message_id, _before in turns:
            with unfolded(tasks) if fold_fails else nullcontext():
                await tasks.finish_assistant_message(
                    task_id_of(key), message_id, tokens_in=77_777, tokens_out=7, cost=12.5
                )
    for key, message_id, tokens_before in turns:
        task = await paged.database[TASKS].find_one({"_id": key})
        assert task is not None and [e["id"] for e in task["pending"]].count(message_id) >= 1
        page = await paged.database[TASK_PAGES].find_one({"task": key, "page": 0})
        stored = next(m for m in page["messages"] if m["id"] == message_id)
        assert stored.get("tokens_in") == tokens_before != 77_777  # the page is not folded
    expected = await reports(plain.scoped(TENANT))
    assert expected["usage0"] != (await _unpaged(stores))["usage0"]  # the verbs count
    assert await reports(paged.scoped(TENANT)) == expected


async def _unpaged(stores: StoreFactory) -> dict[str, Any]:
    if "reports" not in _REFERENCE:
        _REFERENCE["reports"] = await reports((await loaded(stores)).scoped(TENANT))
    return _REFERENCE["reports"]


async def test_pages_of_another_tenant_are_not_read(stores: StoreFactory) -> None:
    """Both tenants paged; page documents stored under one tenant that name the other
    tenant's tasks (under ids of their own) change neither tenant's reports."""
    spec = WorkloadSpec(tenants=2, owners_per_tenant=2, tasks=10, mean_messages=14, seed=2)
    store = await loaded(stores, generate(spec))
    await seal_all(store, PagePolicy(page_messages=3))
    tenants = ("tenant-0", "tenant-1")

    async def all_reports() -> dict[str, Any]:
        out = {}
        for tenant in tenants:
            a = store.scoped(tenant).analytics
            out[tenant] = _plain([await a.usage(group_by=("owner",)), await a.tools(),
                                  await a.sessions(), await a.latency(group_by="owner"),
                                  await a.subtasks(), await a.top_owners()])  # fmt: skip
        return out

    before = await all_reports()
    pages = store.database[TASK_PAGES]
    for attacker, victim in (tenants, tenants[::-1]):
        victims = await store.database[TASKS].find(
            {"tenant": victim, "pages": {"$gt": 0}}
        ).to_list(None)
        theirs = await pages.find({"tenant": attacker}).sort("_id").to_list(None)
        assert len(victims) >= 2 and theirs
        forged = [dict(theirs[n % len(theirs)], _id=f"{attacker}/forged-{n}#0",
                       task=task["_id"], page=0) for n, task in enumerate(victims)]  # fmt: skip
        await pages.insert_many(forged)
    assert await all_reports() == before


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
    rows = [{"_id": {"t": "a"}, "n": 2, "hi": 5, "lo": None},
            {"_id": {"t": "a"}, "n": 3, "hi": None, "lo": 1},
            {"_id": {"t": "b", "missing": None}, "n": 1, "hi": "s", "lo": 4},
            {"_id": {"t": "b"}, "n": 1, "hi": 9, "lo": 2}]  # fmt: skip
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
