"""Every analytics report against the plain-Python reference, on generated workloads.

Seeded random filter combinations (owner, state, model, time range, period, grouping)
over realistic multi-tenant data (`mindstore.workload`: nested sub-tasks, tool errors,
missing usage, forks), plus empty ranges, all-missing usage, fork copies, odd stored
messages, owner-scoped views and bad arguments.
"""

from __future__ import annotations

import copy
import functools
import random
from typing import Any

import pytest

import analytics_reference as ref
from layout import flat_tasks
from mindstore.errors import ValidationError
from mindstore.model.parts import TaskConfigPart
from mindstore.workload import MODELS, Workload, WorkloadSpec, generate, load

SPECS = {
    "mixed": WorkloadSpec(tenants=2, owners_per_tenant=3, tasks=40, mean_messages=30, seed=3),
    "busy": WorkloadSpec(tenants=2, owners_per_tenant=4, tasks=30, mean_messages=50, days=70,
                         tool_error_rate=0.4, missing_usage_rate=0.3, fork_every=4, seed=11),
}  # fmt: skip
STATES = ("running", "completed", "failed", "paused")


@functools.cache
def workload(name: str) -> Workload:
    return generate(SPECS[name])


async def loaded(store: Any, name: str) -> list[ref.StoredTask]:
    data = workload(name)
    await load(store, Workload(tasks=copy.deepcopy(data.tasks), nodes=copy.deepcopy(data.nodes)))
    return await stored(store, "tenant-0")


async def stored(store: Any, tenant: str) -> list[ref.StoredTask]:
    # the whole stored history of each task, sealed pages included
    documents = await flat_tasks(store.database, {"tenant": tenant})
    return ref.stored_tasks(documents, tenant)


def random_filters(rng: random.Random, tasks: list[ref.StoredTask]) -> ref.Filters:
    times = sorted(m.started_ts for t in tasks for m in t.messages)
    owners = sorted({t.owner for t in tasks})
    since = until = None
    if rng.random() < 0.5:
        since = rng.choice(times) + rng.choice((0, 0.5, -3600))
    if rng.random() < 0.5:
        until = rng.choice(times) + rng.choice((0, 1, 86400))
        if since is not None and until <= since:
            since, until = until - 1, since + 1
    return ref.Filters(
        owner=rng.choice([None, None, *owners]),
        state=rng.choice([None, None, None, *STATES]),
        model=rng.choice([None, None, *MODELS]),
        since=since,
        until=until,
    )


def usage_rows(rows: list[Any], dims: tuple[str, ...]) -> dict:
    fields = ("messages", "tokens_in", "tokens_out", "cache_reads", "cache_writes", "cost")
    return {tuple(getattr(r, d) for d in dims): {n: getattr(r, n) for n in fields} for r in rows}


def assert_sums_equal(actual: dict, expected: dict) -> None:
    assert actual.keys() == expected.keys()
    for key, sums in expected.items():
        for name, value in sums.items():
            assert actual[key][name] == pytest.approx(value, abs=1e-6), (key, name)


def distribution_dict(summary: Any) -> dict[str, Any]:
    return summary.model_dump()


async def check_all_reports(
    acme: Any, tasks: list[ref.StoredTask], f: ref.Filters, rng: random.Random
) -> None:
    period = rng.choice([None, "day", "week", "month"])
    dims = tuple(d for d in ("model", "owner") if rng.random() < 0.6)
    full_dims = (("period",) if period else ()) + dims
    kwargs = f.as_kwargs()

    rows = await acme.analytics.usage(group_by=dims, period=period, **kwargs)
    assert_sums_equal(usage_rows(rows, full_dims), ref.usage(tasks, f, full_dims, period))

    by = rng.choice(["cost", "tokens_in"])
    owners = await acme.analytics.top_owners(limit=2, by=by, **kwargs)
    expected_owners = ref.top_owners(tasks, f, 2, by)
    assert [row.owner for row in owners] == [owner for owner, _ in expected_owners]
    for row, (_, sums) in zip(owners, expected_owners, strict=True):
        assert row.tasks == sums["tasks"] and row.cost == pytest.approx(sums["cost"], abs=1e-6)

    rows = await acme.analytics.latency(group_by=dims, period=period, **kwargs)
    latency_dims = full_dims
    expected = ref.latency(tasks, f, latency_dims, period)
    assert {tuple(getattr(r, d) for d in latency_dims):
            {k: getattr(r, k) for k in expected_fields(r)} for r in rows} == expected  # fmt: skip

    tool_dims = (("period",) if period else ()) + (("model",) if "model" in dims else ())
    rows = await acme.analytics.tools(
        group_by=[d for d in tool_dims if d != "period"], period=period, **kwargs
    )
    actual = {(r.tool, *(getattr(r, d) for d in tool_dims)):
              {"calls": r.calls, "results": r.results, "errors": r.errors}
              for r in rows}  # fmt: skip
    assert actual == ref.tools(tasks, f, tool_dims, period)
    for r in rows:
        assert r.error_rate == (pytest.approx(r.errors / r.results) if r.results else None)

    report = await acme.analytics.sessions(**kwargs)
    expected_sessions = ref.sessions(tasks, f)
    assert report.sessions == expected_sessions["sessions"]
    assert distribution_dict(report.messages) == expected_sessions["messages"]
    assert distribution_dict(report.duration) == expected_sessions["duration"]
    assert sum(b.sessions for b in report.length_histogram) == report.sessions
    for b in report.length_histogram:
        assert b.sessions == sum(1 for n in expected_sessions["lengths"]
                                 if n >= b.low and (b.high is None or n < b.high))  # fmt: skip

    rows = await acme.analytics.subtasks(**kwargs)
    expected_spans = ref.subtasks(tasks, f)
    assert {r.depth: {"spans": r.spans, "open": r.open, "messages": r.messages,
                      "duration": distribution_dict(r.duration)}
            for r in rows} == expected_spans  # fmt: skip
    assert all(r.finished == r.spans - r.open for r in rows)

    rows = await acme.analytics.activity(period=period, **kwargs)
    expected_activity = ref.activity(tasks, f, period)
    assert {r.period: (r.tasks_created, r.by_role, r.active_owners) for r in rows} == {
        key: (v["tasks_created"], dict(v["by_role"]), len(v["owners"]))
        for key, v in expected_activity.items()
    }
    owners_rows = await acme.analytics.active_owners(period=period, **kwargs)
    assert {r.period: set(r.owners) for r in owners_rows} == {
        key: v["owners"] for key, v in expected_activity.items() if v["owners"]
    }


def expected_fields(row: Any) -> tuple[str, ...]:
    return ("count", "min", "max", "mean", "p50", "p90", "p99")


@pytest.mark.parametrize("name", sorted(SPECS))
async def test_reports_match_reference_on_random_filters(store, name):
    tasks = await loaded(store, name)
    acme = store.scoped("tenant-0")
    rng = random.Random(name)
    await check_all_reports(acme, tasks, ref.Filters(), rng)  # no filter at all
    for _ in range(12):
        await check_all_reports(acme, tasks, random_filters(rng, tasks), rng)


async def test_reports_cover_only_their_tenant(store):
    await loaded(store, "mixed")
    totals = []
    for tenant in ("tenant-0", "tenant-1"):
        tasks = await stored(store, tenant)
        rows = await store.scoped(tenant).analytics.usage(group_by=())
        expected = ref.usage(tasks, ref.Filters(), (), None)
        assert_sums_equal(usage_rows(rows, ()), expected)
        totals.append(rows[0].cost)
    assert totals[0] > 0 and totals[1] > 0
    assert await store.scoped("nobody").analytics.usage() == []


async def test_empty_ranges_give_empty_reports(store):
    await loaded(store, "mixed")
    acme = store.scoped("tenant-0")
    far = {"since": "2031-01-01", "until": "2031-02-01"}
    assert await acme.analytics.usage(period="day", **far) == []
    assert await acme.analytics.latency(**far) == []
    assert await acme.analytics.tools(**far) == []
    assert await acme.analytics.subtasks(**far) == []
    assert await acme.analytics.activity(**far) == []
    assert await acme.analytics.top_owners(**far) == []
    report = await acme.analytics.sessions(**far)
    assert report.sessions == 0 and report.messages.count == 0 and report.duration.p50 is None
    assert await acme.analytics.usage(model="no/such-model") == []


async def test_missing_usage_counts_turns_with_zero_tokens(store):
    spec = WorkloadSpec(tenants=1, tasks=8, mean_messages=20, missing_usage_rate=1.0, seed=5)
    await load(store, generate(spec))
    tasks = await stored(store, "tenant-0")
    rows = await store.scoped("tenant-0").analytics.usage(group_by=("owner",), period="week")
    dims = ("period", "owner")
    assert_sums_equal(usage_rows(rows, dims), ref.usage(tasks, ref.Filters(), dims, "week"))
    assert rows and all(r.messages > 0 and r.tokens_in == 0 and r.cost == 0 for r in rows)
    assert await store.scoped("tenant-0").analytics.top_owners(by="tokens_out") != []


async def test_fork_copies_are_counted_once(store):
    acme = store.scoped("acme")
    config = TaskConfigPart(model_name="m1")
    task = await acme.tasks.create(owner="alice", config=config)
    for turn in range(3):
        await acme.tasks.add_human_message(task.id, f"question {turn}")
        reply = await acme.tasks.add_assistant_message(task.id)
        await acme.tasks.finish_assistant_message(
            task.id, reply.id, tokens_in=100, tokens_out=10, cost=0.5
        )
    before = await acme.analytics.usage(group_by=())
    assert before[0].messages == 3 and before[0].cost == pytest.approx(1.5)

    child = await acme.dialogs.fork(task.id)  # a full copy
    assert (await acme.tasks.get(child.id)).usage.cost == pytest.approx(1.5)  # the copy's roll-up
    assert await acme.analytics.usage(group_by=()) == before
    sessions = await acme.analytics.sessions()
    assert (
        sessions.sessions == 2 and sessions.length_histogram[0].sessions == 1
    )  # the untouched fork

    reply = await acme.tasks.add_assistant_message(child.id)
    await acme.tasks.finish_assistant_message(
        child.id, reply.id, tokens_in=7, tokens_out=1, cost=0.25
    )
    after = await acme.analytics.usage(group_by=())
    assert (
        after[0].messages == 4
        and after[0].tokens_in == 307
        and after[0].cost == pytest.approx(1.75)
    )
    tasks = await stored(store, "acme")
    assert_sums_equal(usage_rows(after, ()), ref.usage(tasks, ref.Filters(), (), None))


async def test_odd_stored_messages_do_not_break_reports(store):
    """Unknown roles and parts, text timestamps and missing content are kept by the store;
    reports skip what they cannot place and agree with the reference."""
    acme = store.scoped("acme")
    task = await acme.tasks.create(owner="bob", config=TaskConfigPart(model_name="m1"))
    await acme.tasks.add_message(task.id, {"role": "critic", "id": "odd-1",
                                           "started_ts": "yesterday",
                                           "verdict": {"$ref": "#/x"}})  # fmt: skip
    await acme.tasks.add_message(task.id, {"role": "tool", "id": "odd-2", "content": [
        {"type": "toolResult", "tool_call_id": "ghost", "tool_name": "web_search",
         "is_error": True},
        {"type": "hologram", "data": 1}]})  # fmt: skip
    reply = await acme.tasks.add_assistant_message(task.id)
    await acme.tasks.add_text_part(task.id, reply.id, "hi")
    tasks = await stored(store, "acme")
    for f in (ref.Filters(), ref.Filters(since=0, until=4e9)):
        rng = random.Random(1)
        await check_all_reports(acme, tasks, f, rng)
    tools = await acme.analytics.tools()
    assert [(t.tool, t.calls, t.results, t.errors) for t in tools] == [("web_search", 0, 1, 1)]


async def test_owner_scoped_view_and_bad_arguments(store):
    await loaded(store, "mixed")
    tenant = store.scoped("tenant-0")
    owner = (await tenant.analytics.top_owners(limit=1))[0].owner
    scoped = store.scoped("tenant-0", owner=owner)
    assert await scoped.analytics.usage(group_by=("owner",)) == await tenant.analytics.usage(
        group_by=("owner",), owner=owner
    )
    with pytest.raises(ValidationError, match="scoped to owner"):
        await scoped.analytics.usage(owner="someone-else")
    bad_calls = [
        tenant.analytics.usage(group_by=("colour",)),
        tenant.analytics.usage(group_by=("period",)),
        tenant.analytics.usage(period="fortnight"),
        tenant.analytics.latency(since="last tuesday"),
        tenant.analytics.tools(group_by=("owner",)),
        tenant.analytics.sessions(since="2026-10-10", until="2026-10-01"),
        tenant.analytics.subtasks(state="sleeping"),
        tenant.analytics.top_owners(limit=0),
        tenant.analytics.top_owners(by="vibes"),
        tenant.analytics.activity(model=42),
    ]
    for call in bad_calls:
        with pytest.raises(ValidationError):
            await call
