"""`acme.analytics`: reports over one tenant's sessions, as typed rows.

Each report runs one aggregation pipeline (activity runs two) from
`mindstore.pipelines.analytics` and folds its groups with `mindstore.analytics.folding`;
this module only validates arguments, talks to the database and wires the two together.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mindstore.analytics import folding
from mindstore.analytics.periods import Period, TimeBound, epoch_seconds, to_period
from mindstore.analytics.rows import (
    ActiveOwnersRow,
    ActivityRow,
    LatencyRow,
    OwnerRow,
    SessionReport,
    SubtaskRow,
    ToolRow,
    UsageRow,
)
from mindstore.documents import TASKS
from mindstore.errors import ValidationError
from mindstore.model.header import TaskState
from mindstore.pipelines import analytics as pipelines
from mindstore.pipelines.analytics import Pipeline, ReportFilter
from mindstore.validation import check_optional_text, check_owner


class Analytics:
    """Reports for one tenant (and, on an owner-scoped view, one owner).

    Every report takes the same filters: `owner`, `state`, `model`, `since` and `until`
    (datetime, date, epoch seconds or ISO 8601 text; `until` is exclusive). See
    `ReportFilter` for what each filter selects in each report, and docs/analytics.md.
    """

    def __init__(self, database: Any, tenant: str, owner: str | None = None) -> None:
        self.tenant = tenant
        self.scoped_owner: str | None = owner
        self._tasks = database[TASKS]

    # ------------------------------------------------------------------ plumbing
    def _filter(self, owner: str | None, state: TaskState | str | None, model: str | None,
                since: TimeBound, until: TimeBound) -> ReportFilter:  # fmt: skip
        # filters end up in a pipeline: a value BSON cannot encode (a lone surrogate) must be
        # a typed error naming the argument, not an encoder's exception
        owner = check_owner(owner)
        model = check_optional_text(model, "model")
        if self.scoped_owner is not None:
            if owner is not None and owner != self.scoped_owner:
                raise ValidationError(f"this view is scoped to owner {self.scoped_owner!r}")
            owner = self.scoped_owner
        if state is not None:
            try:
                state = TaskState(state).value
            except ValueError:
                raise ValidationError(
                    f"unknown state {state!r}; choose from {[s.value for s in TaskState]}"
                ) from None
        return ReportFilter(tenant=self.tenant, owner=owner, state=state, model=model,
                            since=epoch_seconds(since, "since"), until=epoch_seconds(until, "until"))  # fmt: skip

    async def _run(self, pipeline: Pipeline) -> list[dict[str, Any]]:
        cursor = await self._tasks.aggregate(pipeline)
        return await cursor.to_list(length=None)

    @staticmethod
    def _dims(group_by: Iterable[str] | str, period: Period | None) -> tuple[str, ...]:
        dims = [group_by] if isinstance(group_by, str) else list(group_by)
        if period is not None and "period" not in dims:
            dims.insert(0, "period")
        if period is None and "period" in dims:
            raise ValidationError("grouping by period needs a period: day, week or month")
        return tuple(dims)

    # ------------------------------------------------------------------ reports
    async def usage(self, *, group_by: Iterable[str] | str = ("model",), period: Period | str | None = None,
                    owner: str | None = None, state: TaskState | str | None = None,
                    model: str | None = None, since: TimeBound = None,
                    until: TimeBound = None) -> list[UsageRow]:  # fmt: skip
        """Tokens in/out, cache reads/writes and cost by model, owner and/or period."""
        period = to_period(period)
        dims = self._dims(group_by, period)
        f = self._filter(owner, state, model, since, until)
        groups = await self._run(pipelines.usage_pipeline(f, dims))
        return folding.fold_usage(groups, dims, period)

    async def top_owners(self, *, limit: int = 10, by: str = "cost", owner: str | None = None,
                         state: TaskState | str | None = None, model: str | None = None,
                         since: TimeBound = None, until: TimeBound = None) -> list[OwnerRow]:  # fmt: skip
        """Owners ranked by cost (or tokens_in, tokens_out, ...), largest first."""
        f = self._filter(owner, state, model, since, until)
        return folding.fold_owners(await self._run(pipelines.top_owners_pipeline(f, limit, by)))

    async def latency(self, *, group_by: Iterable[str] | str = ("model",), period: Period | str | None = None,
                      owner: str | None = None, state: TaskState | str | None = None,
                      model: str | None = None, since: TimeBound = None,
                      until: TimeBound = None) -> list[LatencyRow]:  # fmt: skip
        """Assistant response times with exact p50/p90/p99 (seconds)."""
        period = to_period(period)
        dims = self._dims(group_by, period)
        f = self._filter(owner, state, model, since, until)
        return folding.fold_latency(await self._run(pipelines.latency_pipeline(f, dims)), dims, period)

    async def tools(self, *, group_by: Iterable[str] | str = (), period: Period | str | None = None,
                    owner: str | None = None, state: TaskState | str | None = None,
                    model: str | None = None, since: TimeBound = None,
                    until: TimeBound = None) -> list[ToolRow]:  # fmt: skip
        """Tool calls by tool name with results, errors and error rate."""
        period = to_period(period)
        dims = self._dims(group_by, period)
        f = self._filter(owner, state, model, since, until)
        return folding.fold_tools(await self._run(pipelines.tools_pipeline(f, dims)), dims, period)

    async def sessions(self, *, owner: str | None = None, state: TaskState | str | None = None,
                       model: str | None = None, since: TimeBound = None,
                       until: TimeBound = None) -> SessionReport:  # fmt: skip
        """Session length (own messages) and duration distributions."""
        f = self._filter(owner, state, model, since, until)
        return folding.fold_sessions(await self._run(pipelines.sessions_pipeline(f)))

    async def subtasks(self, *, owner: str | None = None, state: TaskState | str | None = None,
                       model: str | None = None, since: TimeBound = None,
                       until: TimeBound = None) -> list[SubtaskRow]:  # fmt: skip
        """Sub-task spans by depth: how many, how many finished, their size and duration."""
        f = self._filter(owner, state, model, since, until)
        return folding.fold_subtasks(await self._run(pipelines.subtasks_pipeline(f)))

    async def activity(self, *, period: Period | str | None = "day", owner: str | None = None,
                       state: TaskState | str | None = None, model: str | None = None,
                       since: TimeBound = None, until: TimeBound = None) -> list[ActivityRow]:  # fmt: skip
        """Tasks created, messages by role and active owners, per period."""
        period = to_period(period)
        f = self._filter(owner, state, model, since, until)
        messages = await self._run(pipelines.message_activity_pipeline(f))
        created = await self._run(pipelines.tasks_created_pipeline(f))
        return folding.fold_activity(messages, created, period)

    async def active_owners(self, *, period: Period | str | None = "day", owner: str | None = None,
                            state: TaskState | str | None = None, model: str | None = None,
                            since: TimeBound = None, until: TimeBound = None) -> list[ActiveOwnersRow]:  # fmt: skip
        """Owners with at least one message of their own in each period."""
        period = to_period(period)
        f = self._filter(owner, state, model, since, until)
        return folding.fold_active_owners(await self._run(pipelines.message_activity_pipeline(f)), period)
