"""Analytics over paged tasks: every report counts sealed pages and the open page once.

The same stored workload is reported on before and after its tasks are paged by the
task repository's own seals (`paging_fixtures.seal_all`, with small page policies); the
reports must not change, whatever the page size, filters and groupings. Half-done seals
(pages past the task's `pages` mark) are ignored, pending changes to sealed messages are
applied, and another tenant's pages are never read.
"""

from __future__ import annotations

import ast
import copy
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import mongomock.aggregate
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mindstore
from conftest import StoreFactory
from mindstore import PagePolicy, Store
from mindstore.backends.recorder import observe_all
from mindstore.documents import TASK_PAGES, TASKS
from mindstore.ids import task_id_of
from mindstore.paged_history import apply_pending, page_ranges, paged_or
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
        victims = (
            await store.database[TASKS].find({"tenant": victim, "pages": {"$gt": 0}}).to_list(None)
        )
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


def test_paged_or_keeps_paged_tasks_whatever_their_open_page_holds():
    hint = {"$gte": 1, "$lt": 2}
    assert paged_or({"tenant": "t"}, "messages.started_ts") == {"tenant": "t"}
    assert paged_or({"tenant": "t", "messages.started_ts": hint}, "messages.started_ts") == {
        "tenant": "t",
        "$or": [{"messages.started_ts": hint}, {"pages": {"$gt": 0}}],
    }
    models = [{"root_model_name": "m"}, {"root_model_name": None, "last_model_name": "m"}]
    both = paged_or({"tenant": "t", "$or": models, "messages.started_ts": hint},
                    "messages.started_ts")  # fmt: skip
    assert both == {"tenant": "t", "$and": [
        {"$or": models}, {"$or": [{"messages.started_ts": hint}, {"pages": {"$gt": 0}}]},
    ]}  # fmt: skip


def test_a_report_over_pages_keeps_its_own_stages_after_the_history():
    pipeline = [{"$match": {"tenant": "t", "messages.started_ts": {"$gte": 1}}},
                {"$project": {"owner": 1}}, {"$group": {"_id": 1}}]  # fmt: skip
    assert analytics_pages.history_query(pipeline) == {"tenant": "t"}
    over = analytics_pages.over_history(pipeline, "t")
    assert over[-2:] == pipeline[1:] and over[-2] is not pipeline[1]  # copied, unchanged
    assert "pages" in str(over[0]) and any("$lookup" in stage for stage in over)
    with pytest.raises(ValueError, match="task \\$match"):
        analytics_pages.history_query([{"$project": {"owner": 1}}])


# ------------------------------------------------------------------ server only
REPORTS = ("usage", "top_owners", "latency", "tools", "sessions", "subtasks", "activity",
           "active_owners")  # fmt: skip


async def test_a_report_over_paged_tasks_runs_on_the_server_only(
    stores: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every report over paged tasks with pending changes sends one aggregation (activity:
    two, its tasks-created pipeline too) and reads nothing else but the task headers and
    the pages the pending changes touch; no pipeline stage runs in process (mongomock's
    engine is run by the embedded backend only, once per aggregation it answers)."""
    store = await loaded(stores)
    await seal_all(store, SMALL, TENANT)
    tasks = store.scoped(TENANT).tasks
    page = await store.database[TASK_PAGES].find_one({"tenant": TENANT, "page": 0})
    turn = next(m for m in page["messages"] if m["role"] == "assistant")
    with unfolded(tasks):
        await tasks.finish_assistant_message(task_id_of(page["task"]), turn["id"], tokens_in=9)
    held = await store.database[TASKS].find_one({"_id": page["task"]})
    assert held is not None and held["pending"]  # the report reads a patch
    engine_runs: list[str] = []
    run = mongomock.aggregate.process_pipeline

    def counted(*args: Any, **kwargs: Any) -> Any:
        engine_runs.append(sys._getframe(1).f_globals["__name__"])
        return run(*args, **kwargs)

    monkeypatch.setattr(mongomock.aggregate, "process_pipeline", counted)
    a = store.scoped(TENANT).analytics
    for name in REPORTS:
        engine_runs.clear()
        with observe_all() as log:
            await getattr(a, name)()
        aggregations = [c for c in log if c.name == "aggregate"]
        assert len(aggregations) == (2 if name == "activity" else 1), name
        assert {c.collection for c in aggregations} == {TASKS}, name
        assert {(c.name, c.collection) for c in log} <= {
            ("aggregate", TASKS), ("find", TASKS), ("find", TASK_PAGES)
        }, name  # fmt: skip
        embedded = [c for c in aggregations if c.backend == "embedded"]
        assert len(engine_runs) == len(embedded), (name, engine_runs)
        assert all(m.startswith("mindstore.backends.embedded") for m in engine_runs), engine_runs


def test_no_reader_of_paged_histories_loads_an_aggregation_engine():
    """Analytics, its pipelines and the paged-history reader never import mongomock (an
    in-process engine would evaluate stages the server should)."""
    root = Path(mindstore.__file__).parent
    files = [*root.joinpath("analytics").glob("*.py"), *root.joinpath("paged_history").glob("*.py"),
             *root.joinpath("pipelines").glob("*.py")]  # fmt: skip
    assert len(files) >= 10
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])  # fmt: skip
            assert not any(n.split(".")[0] == "mongomock" for n in names), path


@pytest.mark.parametrize("forged", ["another tenant", "another task"])
async def test_a_page_id_held_by_a_page_of_someone_else_is_not_read(
    stores: StoreFactory, forged: str
) -> None:
    """A visible page's `_id` held by a document stored under another tenant, or naming
    another task: the reports count it as they count the page missing."""
    store = await loaded(stores)
    await seal_all(store, SMALL, TENANT)
    pages = store.database[TASK_PAGES]
    page = await pages.find_one({"tenant": TENANT, "page": 1})
    assert page is not None
    await pages.delete_one({"_id": page["_id"]})
    missing = await reports(store.scoped(TENANT))
    if forged == "another tenant":
        await pages.insert_one(dict(page, tenant="tenant-9"))
    else:
        others = {"tenant": TENANT, "_id": {"$ne": page["task"]}}
        other = await store.database[TASKS].find_one(others)
        await pages.insert_one(dict(page, task=other["_id"]))
    assert await reports(store.scoped(TENANT)) == missing
    await pages.replace_one({"_id": page["_id"]}, page)  # the page itself is counted
    assert await reports(store.scoped(TENANT)) != missing
