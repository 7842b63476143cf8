"""Day figures kept between reads (mindstore.analytics.incremental): the rows are the
reports' own for any UTC-day bounds and period, and a read after a write recomputes only
the batch that holds the changed task (counted in commands, not timed)."""

from __future__ import annotations

from typing import Any

import pytest

from mindstore.analytics.incremental import DayFigures, day_aligned
from mindstore.analytics.periods import epoch_seconds
from mindstore.backends.recorder import observe_all
from mindstore.store import Store
from mindstore.workload import WorkloadSpec, generate, load

SPEC = WorkloadSpec(tenants=1, owners_per_tenant=3, tasks=30, mean_messages=10, fork_every=5)
BOUNDS = [(None, None), ("2026-10-05", None), (None, "2026-10-20"), ("2026-10-03", "2026-10-12")]


@pytest.fixture
async def loaded(store: Store) -> Store:
    await load(store, generate(SPEC))
    return store


async def _same_as_the_reports(figures: DayFigures, store: Store) -> None:
    analytics = store.scoped("tenant-0").analytics
    for low, high in BOUNDS:
        since, until = epoch_seconds(low, "since"), epoch_seconds(high, "until")
        for period in ("day", "week", "month"):
            direct = await analytics.usage(group_by=("period", "model"), period=period,
                                           since=low, until=high)  # fmt: skip
            assert figures.usage(period, since, until) == direct, (low, high, period)
            owners = await analytics.active_owners(period=period, since=low, until=high)
            assert figures.active_owners(period, since, until) == owners
        latency = await analytics.latency(group_by=("model",), since=low, until=high)
        assert figures.latency(since, until) == latency, (low, high)
        assert figures.tools(since, until) == await analytics.tools(since=low, until=high)
    # narrowed to one model or one owner, as the reports' own filters narrow them
    model, owner = "openai/gpt-4o", "tenant-0-user-1"
    assert figures.usage("week", model=model) and figures.usage("week", owner=owner)
    for low, high in BOUNDS[:2]:
        since, until = epoch_seconds(low, "since"), epoch_seconds(high, "until")
        for by in ({"model": model}, {"owner": owner}, {"model": model, "owner": owner}):
            direct = await analytics.usage(group_by=("period", "model"), period="week",
                                           since=low, until=high, **by)  # fmt: skip
            assert figures.usage("week", since, until, **by) == direct, by
            latency = await analytics.latency(group_by=("model",), since=low, until=high, **by)
            assert figures.latency(since, until, **by) == latency, by
        tools = await analytics.tools(since=low, until=high, model=model)
        assert figures.tools(since, until, model=model) == tools
        owners = await analytics.active_owners(period="day", since=low, until=high, owner=owner)
        assert figures.active_owners("day", since, until, owner=owner) == owners


async def test_kept_figures_are_the_reports_rows(loaded: Store) -> None:
    figures = DayFigures(loaded.scoped("tenant-0").analytics, batch_tasks=7)
    await figures.refresh()
    assert figures.refreshed and figures.done == figures.total > 7
    assert figures.usage("day") and figures.tools() and figures.latency()
    await _same_as_the_reports(figures, loaded)


async def test_a_read_after_a_write_recomputes_one_batch(loaded: Store) -> None:
    figures = DayFigures(loaded.scoped("tenant-0").analytics, batch_tasks=7)
    await figures.refresh()
    tasks = loaded.scoped("tenant-0").tasks
    with observe_all() as log:
        await figures.refresh()
    assert [c.name for c in log] == ["find"]  # nothing changed: the versions only

    task_id = (await tasks.list(limit=1)).items[0].id
    await tasks.add_human_message(task_id, "one more")
    created = await tasks.create(owner="new-owner", title="new")
    await tasks.add_human_message(created.id, "hello")
    with observe_all() as log:
        await figures.refresh()
    aggregates = [c for c in log if c.name == "aggregate"]
    per_batch = 4  # usage, latency, tools, activity
    assert len(aggregates) <= 2 * per_batch  # the changed task's batch and the new task's
    for command in aggregates:  # each over its batch of tasks only
        assert len(command.pipeline[0]["$match"]["_id"]["$in"]) <= 7
    # besides: the versions' find, and the paged-history checks of each pipeline
    assert len(log) <= 1 + 3 * len(aggregates)
    await _same_as_the_reports(figures, loaded)


async def test_a_deleted_task_leaves_the_figures(loaded: Store) -> None:
    figures = DayFigures(loaded.scoped("tenant-0").analytics)
    await figures.refresh()
    tasks = loaded.scoped("tenant-0").tasks
    listed = await tasks.list(limit=5)
    for record in listed.items:
        await tasks.delete(record.id)
    await figures.refresh()
    assert figures.total == figures.done
    await _same_as_the_reports(figures, loaded)


@pytest.mark.parametrize(
    ("seconds", "aligned"), [(None, True), (0.0, True), (86_400.0 * 3, True), (86_401.0, False)]
)
def test_only_day_starts_are_answered_from_kept_figures(seconds: Any, aligned: bool) -> None:
    assert day_aligned(seconds) is aligned
