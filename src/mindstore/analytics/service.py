"""`acme.analytics`: reports over one tenant's sessions, as typed rows.

Each report runs one aggregation pipeline (activity runs two) from
`mindstore.pipelines.analytics` and folds its groups with `mindstore.analytics.folding`;
this module only validates arguments, talks to the database and wires the two together.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
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
from mindstore.collection_names import TASK_PAGES, TASKS
from mindstore.errors import ValidationError, WrongType
from mindstore.model.header import TaskState
from mindstore.operations import Resilience, operations
from mindstore.paged_history import PagedHistory
from mindstore.pipelines import analytics as pipelines
from mindstore.pipelines import analytics_pages as paged
from mindstore.pipelines.analytics import Pipeline, ReportFilter
from mindstore.validation import check_optional_text, check_owner, check_text


def _dimension_names(group_by: Any) -> list[str]:
    """`group_by` as a list of names: one name, or an iterable of names (not a mapping,
    not bytes); anything else is refused here, naming the argument, before it reaches a
    pipeline (where an unhashable or non-string value would be a bare TypeError)."""
    if isinstance(group_by, str):
        return [group_by]
    if isinstance(group_by, (bytes, bytearray, Mapping)) or not isinstance(group_by, Iterable):
        raise WrongType(
            f"group_by must be a dimension name or a list of them, got {type(group_by).__name__}"
        )
    names = list(group_by)
    for name in names:
        if not isinstance(name, str):
            raise WrongType(f"group_by must hold dimension names, got {type(name).__name__}")
    return names


@operations("analytics")  # reads: retried under the store's policy, then Unavailable
class Analytics:
    """Reports for one tenant (and, on an owner-scoped view, one owner).

    Every report takes the same filters: `owner`, `state`, `model`, `since` and `until`
    (datetime, date, epoch seconds or ISO 8601 text; `until` is exclusive). See
    `ReportFilter` for what each filter selects in each report, and docs/analytics.md.
    """

    def __init__(
        self,
        database: Any,
        tenant: str,
        owner: str | None = None,
        resilience: Resilience | None = None,
    ) -> None:
        self.tenant = tenant
        self.scoped_owner: str | None = owner
        self.resilience = resilience
        """The store's retry policy: a report is a read, safe to run again."""
        self._tasks = database[TASKS]
        self._history = PagedHistory(self._tasks, database[TASK_PAGES])

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
        return ReportFilter(
            tenant=self.tenant,
            owner=owner,
            state=state,
            model=model,
            since=epoch_seconds(since, "since"),
            until=epoch_seconds(until, "until"),
        )

    async def _run(self, pipeline: Pipeline) -> list[dict[str, Any]]:
        cursor = await self._tasks.aggregate(pipeline)
        rows: list[dict[str, Any]] = await cursor.to_list(length=None)
        return rows

    async def _report(self, pipeline: Pipeline) -> list[dict[str, Any]]:
        """Run a report over every message of the tasks it covers, sealed pages included:
        one pipeline on the server (`mindstore.pipelines.analytics_pages`); a tenant with no
        paged task in the report's scope runs the report's own pipeline, as before paging."""
        query = paged.history_query(pipeline)
        if not await self._history.any_paged(query):
            return await self._run(pipeline)
        patches = await self._history.patches(self.tenant, query)
        return await self._run(paged.over_history(pipeline, self.tenant, patches))

    @staticmethod
    def _dims(group_by: Iterable[str] | str, period: Period | None) -> tuple[str, ...]:
        dims = _dimension_names(group_by)
        if period is not None and "period" not in dims:
            dims.insert(0, "period")
        if period is None and "period" in dims:
            raise ValidationError("grouping by period needs a period: day, week or month")
        return tuple(dims)

    # ------------------------------------------------------------------ reports
    async def usage(
        self,
        *,
        group_by: Iterable[str] | str = ("model",),
        period: Period | str | None = None,
        owner: str | None = None,
        state: TaskState | str | None = None,
        model: str | None = None,
        since: TimeBound = None,
        until: TimeBound = None,
    ) -> list[UsageRow]:
        """Tokens in/out, cache reads/writes and cost, grouped by model, owner and/or period.

        Counts assistant turns (and any message carrying usage), sealed pages included.

        Args:
            group_by: `"model"`, `"owner"`, `"period"` or a list of them (the order of the
                row keys); a period needs `period`.
            period: Also bucket by `"day"`, `"week"` (ISO) or `"month"`, in UTC.
            owner: Only this owner's tasks (an owner-scoped view: only its own).
            state: Only tasks in this state.
            model: Only this model (what it selects per report: `ReportFilter`).
            since: From this time, inclusive: a datetime, a date, epoch seconds or ISO 8601 text.
            until: Up to this time, exclusive (same forms).

        Returns:
            One `UsageRow` per group.

        Raises:
            ValidationError: A bad filter (unknown state, a time that is not one, `since` after
                `until`), or an owner other than an owner-scoped view's.
            ValidationError: `group_by` is not a name or a list of names, or names an unknown
                dimension; an unknown period.

        Example:
            ```python
            rows = await acme.analytics.usage(group_by=("model", "owner"), period="week")
            ```
        """
        period = to_period(period)
        dims = self._dims(group_by, period)
        f = self._filter(owner, state, model, since, until)
        groups = await self._report(pipelines.usage_pipeline(f, dims))
        return folding.fold_usage(groups, dims, period)

    async def top_owners(
        self,
        *,
        limit: int = 10,
        by: str = "cost",
        owner: str | None = None,
        state: TaskState | str | None = None,
        model: str | None = None,
        since: TimeBound = None,
        until: TimeBound = None,
    ) -> list[OwnerRow]:
        """Owners ranked by cost (or a token measure), largest first, with how many tasks their
        usage came from.

        Args:
            limit: How many owners (1 to 10,000).
            by: `"cost"`, `"tokens_in"`, `"tokens_out"`, `"cache_reads"` or `"cache_writes"`.
            owner: Only this owner's tasks (an owner-scoped view: only its own).
            state: Only tasks in this state.
            model: Only this model (what it selects per report: `ReportFilter`).
            since: From this time, inclusive: a datetime, a date, epoch seconds or ISO 8601 text.
            until: Up to this time, exclusive (same forms).

        Returns:
            One `OwnerRow` per owner.

        Raises:
            ValidationError: A bad filter (unknown state, a time that is not one, `since` after
                `until`), or an owner other than an owner-scoped view's.
            ValidationError: `by` is not one of the measures, or a bad limit.
        """
        check_text(by, "by")
        f = self._filter(owner, state, model, since, until)
        return folding.fold_owners(await self._report(pipelines.top_owners_pipeline(f, limit, by)))

    async def latency(
        self,
        *,
        group_by: Iterable[str] | str = ("model",),
        period: Period | str | None = None,
        owner: str | None = None,
        state: TaskState | str | None = None,
        model: str | None = None,
        since: TimeBound = None,
        until: TimeBound = None,
    ) -> list[LatencyRow]:
        """Assistant response times with exact p50/p90/p99 (seconds), grouped by model, owner
        and/or period.

        Args:
            group_by: `"model"`, `"owner"`, `"period"` or a list of them (the order of the
                row keys); a period needs `period`.
            period: Also bucket by `"day"`, `"week"` (ISO) or `"month"`, in UTC.
            owner: Only this owner's tasks (an owner-scoped view: only its own).
            state: Only tasks in this state.
            model: Only this model (what it selects per report: `ReportFilter`).
            since: From this time, inclusive: a datetime, a date, epoch seconds or ISO 8601 text.
            until: Up to this time, exclusive (same forms).

        Returns:
            One `LatencyRow` per group: count, mean, min, p50, p90, p99, max.

        Raises:
            ValidationError: A bad filter (unknown state, a time that is not one, `since` after
                `until`), or an owner other than an owner-scoped view's.
            ValidationError: A bad `group_by` or period.

        Example:
            ```python
            rows = await acme.analytics.latency(group_by="model")
            ```
        """
        period = to_period(period)
        dims = self._dims(group_by, period)
        f = self._filter(owner, state, model, since, until)
        return folding.fold_latency(
            await self._report(pipelines.latency_pipeline(f, dims)), dims, period
        )

    async def tools(self, *, group_by: Iterable[str] | str = (), period: Period | str | None = None,
                    owner: str | None = None, state: TaskState | str | None = None,
                    model: str | None = None, since: TimeBound = None,
                    until: TimeBound = None) -> list[ToolRow]:  # fmt: skip
        """Tool calls by tool name, with results, errors and the error rate; optionally also by
        model and/or period.

        Args:
            group_by: `"model"`, `"period"` or a list of them, on top of the tool name (a call
                has no owner of its own).
            period: Also bucket by `"day"`, `"week"` (ISO) or `"month"`, in UTC.
            owner: Only this owner's tasks (an owner-scoped view: only its own).
            state: Only tasks in this state.
            model: Only this model (what it selects per report: `ReportFilter`).
            since: From this time, inclusive: a datetime, a date, epoch seconds or ISO 8601 text.
            until: Up to this time, exclusive (same forms).

        Returns:
            One `ToolRow` per tool and group.

        Raises:
            ValidationError: A bad filter (unknown state, a time that is not one, `since` after
                `until`), or an owner other than an owner-scoped view's.
            ValidationError: A bad `group_by` or period.
        """
        period = to_period(period)
        dims = self._dims(group_by, period)
        f = self._filter(owner, state, model, since, until)
        return folding.fold_tools(
            await self._report(pipelines.tools_pipeline(f, dims)), dims, period
        )

    async def sessions(self, *, owner: str | None = None, state: TaskState | str | None = None,
                       model: str | None = None, since: TimeBound = None,
                       until: TimeBound = None) -> SessionReport:  # fmt: skip
        """Session length (own messages) and duration distributions, with a length histogram.

        Args:
            owner: Only this owner's tasks (an owner-scoped view: only its own).
            state: Only tasks in this state.
            model: Only this model (what it selects per report: `ReportFilter`).
            since: From this time, inclusive: a datetime, a date, epoch seconds or ISO 8601 text.
            until: Up to this time, exclusive (same forms).

        Returns:
            A `SessionReport`.

        Raises:
            ValidationError: A bad filter (unknown state, a time that is not one, `since` after
                `until`), or an owner other than an owner-scoped view's.
        """
        f = self._filter(owner, state, model, since, until)
        return folding.fold_sessions(await self._report(pipelines.sessions_pipeline(f)))

    async def subtasks(self, *, owner: str | None = None, state: TaskState | str | None = None,
                       model: str | None = None, since: TimeBound = None,
                       until: TimeBound = None) -> list[SubtaskRow]:  # fmt: skip
        """Sub-task spans by depth: how many, how many finished, their size and duration.

        Args:
            owner: Only this owner's tasks (an owner-scoped view: only its own).
            state: Only tasks in this state.
            model: Only this model (what it selects per report: `ReportFilter`).
            since: From this time, inclusive: a datetime, a date, epoch seconds or ISO 8601 text.
            until: Up to this time, exclusive (same forms).

        Returns:
            One `SubtaskRow` per depth.

        Raises:
            ValidationError: A bad filter (unknown state, a time that is not one, `since` after
                `until`), or an owner other than an owner-scoped view's.
        """
        f = self._filter(owner, state, model, since, until)
        return folding.fold_subtasks(await self._report(pipelines.subtasks_pipeline(f)))

    async def activity(
        self,
        *,
        period: Period | str | None = "day",
        owner: str | None = None,
        state: TaskState | str | None = None,
        model: str | None = None,
        since: TimeBound = None,
        until: TimeBound = None,
    ) -> list[ActivityRow]:
        """Per period: tasks created, messages by role and active owners.

        Args:
            period: `"day"`, `"week"` (ISO) or `"month"`, in UTC.
            owner: Only this owner's tasks (an owner-scoped view: only its own).
            state: Only tasks in this state.
            model: Only this model (what it selects per report: `ReportFilter`).
            since: From this time, inclusive: a datetime, a date, epoch seconds or ISO 8601 text.
            until: Up to this time, exclusive (same forms).

        Returns:
            One `ActivityRow` per period.

        Raises:
            ValidationError: A bad filter (unknown state, a time that is not one, `since` after
                `until`), or an owner other than an owner-scoped view's.
            ValidationError: An unknown period.
        """
        period = to_period(period)
        f = self._filter(owner, state, model, since, until)
        messages = await self._report(pipelines.message_activity_pipeline(f))
        created = await self._run(pipelines.tasks_created_pipeline(f))
        return folding.fold_activity(messages, created, period)

    async def active_owners(
        self,
        *,
        period: Period | str | None = "day",
        owner: str | None = None,
        state: TaskState | str | None = None,
        model: str | None = None,
        since: TimeBound = None,
        until: TimeBound = None,
    ) -> list[ActiveOwnersRow]:
        """Owners with at least one message of their own in each period.

        Args:
            period: `"day"`, `"week"` (ISO) or `"month"`, in UTC.
            owner: Only this owner's tasks (an owner-scoped view: only its own).
            state: Only tasks in this state.
            model: Only this model (what it selects per report: `ReportFilter`).
            since: From this time, inclusive: a datetime, a date, epoch seconds or ISO 8601 text.
            until: Up to this time, exclusive (same forms).

        Returns:
            One `ActiveOwnersRow` per period.

        Raises:
            ValidationError: A bad filter (unknown state, a time that is not one, `since` after
                `until`), or an owner other than an owner-scoped view's.
            ValidationError: An unknown period.
        """
        period = to_period(period)
        f = self._filter(owner, state, model, since, until)
        return folding.fold_active_owners(
            await self._report(pipelines.message_activity_pipeline(f)), period
        )

    # ------------------------------------------------------------------ incremental reads
    async def task_versions(self) -> dict[str, int]:
        """Each task's stored id and version (a write bumps it): one projected `find` of
        the tenant's (or the scoped owner's) tasks, no message read. What
        `mindstore.analytics.incremental` compares to know what changed.

        Returns:
            Stored task id -> version.
        """
        query: dict[str, Any] = {"tenant": self.tenant}
        if self.scoped_owner is not None:
            query["owner"] = self.scoped_owner
        found = await self._tasks.find(query, {"version": 1}).to_list(length=None)
        return {d["_id"]: int(d.get("version") or 0) for d in found if isinstance(d["_id"], str)}

    async def day_groups(self, report: str, task_keys: Iterable[str]) -> list[dict[str, Any]]:
        """The raw groups, by UTC day, of one of the usage and latency (by model and
        owner), tools (by model) and message-activity reports over these tasks only: what
        `incremental.DayFigures` keeps and folds. Groups of different batches merge
        exactly in the folds (sums add, histograms add, owner sets union).

        Args:
            report: `"usage"`, `"latency"`, `"tools"` or `"activity"` (`DAY_REPORTS`).
            task_keys: Stored task ids, as `task_versions` names them.

        Returns:
            The report's pipeline groups, unfolded.

        Raises:
            ValidationError: An unknown report.
        """
        build = DAY_REPORTS.get(report) if isinstance(report, str) else None
        if build is None:
            raise ValidationError(f"report: expected one of {', '.join(DAY_REPORTS)}")
        f = ReportFilter(tenant=self.tenant, owner=self.scoped_owner,
                         task_keys=tuple(task_keys))  # fmt: skip
        return await self._report(build(f))


DAY_REPORTS: dict[str, Callable[[ReportFilter], Pipeline]] = {
    "usage": lambda f: pipelines.usage_pipeline(f, ("period", "model", "owner")),
    "latency": lambda f: pipelines.latency_pipeline(f, ("period", "model", "owner")),
    "tools": lambda f: pipelines.tools_pipeline(f, ("period", "model")),
    "activity": pipelines.message_activity_pipeline,
}
"""The reports `Analytics.day_groups` runs, each grouped by UTC day."""
