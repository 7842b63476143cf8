"""Day figures of a tenant kept between reads and brought up to date incrementally.

A report over a whole tenant reads every message of every task: on the embedded backend,
seconds per report at 100,000 messages, however short the period asked for. The console
draws the same four reports again and again over data that mostly has not changed, so
`DayFigures` keeps their raw groups by UTC day (what the pipelines return before
folding, `mindstore.analytics.folding`), computed over batches of tasks, and remembers
each task's `version` (every write bumps it). A read first lists the tenant's task
versions (one projected `find`, no message), recomputes only the batches holding a task
that changed, appeared or went, then folds the kept groups. The fold is the reports' own
and the groups merge exactly (sums add, histograms add, owner sets union), so the rows
are those of `acme.analytics` for the same filters, for bounds on UTC day starts.

Each batch is four small pipelines (one per report, over a couple of tasks), and the event
loop runs other work between two of them, so a cold start never holds a server's loop for
long (on the embedded backend, which runs a pipeline on the loop, a pause is one report
over one batch's messages). `progress` says how far a
refresh is.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Final

from mindstore.analytics import folding
from mindstore.analytics.periods import Period, to_period
from mindstore.analytics.rows import ActiveOwnersRow, LatencyRow, ToolRow, UsageRow
from mindstore.analytics.service import DAY_REPORTS, Analytics

BATCH_TASKS: Final = 2
"""Tasks per batch: one report over so few messages is a short pause of the event loop
(the embedded backend runs a pipeline on it, at about half a millisecond a message)."""
DAY_SECONDS: Final = 86_400
Groups = list[dict[str, Any]]


def day_aligned(seconds: float | None) -> bool:
    """Whether a bound is a UTC day start (or absent): what the kept groups can answer."""
    return seconds is None or seconds % DAY_SECONDS == 0


@dataclass
class _Batch:
    versions: dict[str, int]
    groups: dict[str, Groups]


@dataclass
class DayFigures:
    """One tenant's usage, latency, tools and activity groups by day, kept per batch of
    tasks (`refresh` brings them up to date; the report methods fold them)."""

    analytics: Analytics
    batch_tasks: int = BATCH_TASKS
    _batches: list[_Batch] = field(default_factory=list)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    done: int = 0
    """Tasks whose groups are up to date, of `total`."""
    total: int = 0
    refreshed: bool = False
    """Whether a refresh has completed once (the figures cover every task then)."""

    async def refresh(self) -> None:
        """Bring the groups up to date: recompute the batches whose tasks changed (one
        refresh at a time; a second caller waits for the first and finds little to do)."""
        async with self._lock:
            versions = await self.analytics.task_versions()
            kept: list[_Batch] = []
            stale: list[str] = []
            for batch in self._batches:
                if all(versions.get(k) == v for k, v in batch.versions.items()):
                    kept.append(batch)
                else:  # recompute its tasks that are still there
                    stale.extend(k for k in batch.versions if k in versions)
            covered = {k for batch in kept for k in batch.versions}
            stale.extend(k for k in versions if k not in covered and k not in stale)
            self._batches = kept
            self.total = len(versions)
            self.done = len(covered)
            for start in range(0, len(stale), self.batch_tasks):
                keys = stale[start : start + self.batch_tasks]
                groups: dict[str, Groups] = {}
                for report in DAY_REPORTS:
                    groups[report] = await self.analytics.day_groups(report, keys)
                    await asyncio.sleep(0)  # the loop serves others between two reports
                self._batches.append(_Batch({k: versions[k] for k in keys}, groups))
                self.done += len(keys)
            self.refreshed = True

    def _groups(
        self,
        report: str,
        key: str,
        since: float | None,
        until: float | None,
        **match: str | None,
    ) -> Groups:
        """The kept groups of `report` whose day (`_id[key]`) is in `[since, until)` and
        whose `_id` has each given `match` value (model, owner)."""
        wanted = {name: value for name, value in match.items() if value is not None}
        found = []
        for batch in self._batches:
            for group in batch.groups[report]:
                raw = group.get("_id") or {}
                if any(raw.get(name) != value for name, value in wanted.items()):
                    continue
                day = raw.get(key)
                if not isinstance(day, (int, float)):
                    if since is None and until is None:
                        found.append(group)
                    continue
                if (since is None or day >= since) and (until is None or day < until):
                    found.append(group)
        return found

    def usage(
        self,
        period: Period | str,
        since: float | None = None,
        until: float | None = None,
        *,
        model: str | None = None,
        owner: str | None = None,
    ) -> list[UsageRow]:
        """`analytics.usage(group_by=("period", "model"), period=period, ...)`."""
        groups = self._groups("usage", "period", since, until, model=model, owner=owner)
        return folding.fold_usage(groups, ("period", "model"), to_period(period))

    def latency(
        self,
        since: float | None = None,
        until: float | None = None,
        *,
        model: str | None = None,
        owner: str | None = None,
    ) -> list[LatencyRow]:
        """`analytics.latency(group_by=("model",), ...)`."""
        groups = self._groups("latency", "period", since, until, model=model, owner=owner)
        return folding.fold_latency(groups, ("model",), None)

    def tools(
        self, since: float | None = None, until: float | None = None, *, model: str | None = None
    ) -> list[ToolRow]:
        """`analytics.tools(group_by=(), ...)` (a tool call has no owner of its own: the
        kept groups cannot select one)."""
        groups = self._groups("tools", "period", since, until, model=model)
        return folding.fold_tools(groups, (), None)

    def active_owners(
        self,
        period: Period | str,
        since: float | None = None,
        until: float | None = None,
        *,
        owner: str | None = None,
    ) -> list[ActiveOwnersRow]:
        """`analytics.active_owners(period=period, ...)` (the report selects a model by
        each task's root config, which the kept groups do not hold)."""
        groups = self._groups("activity", "day", since, until, owner=owner)
        return folding.fold_active_owners(groups, to_period(period))
