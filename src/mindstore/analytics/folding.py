"""Turn raw pipeline groups into report rows (pure, no I/O).

The server groups by UTC day; here days are rolled up into the requested period and
groups whose keys become equal are merged (sums add, histograms add, owner sets union).
Missing and null keys are the same thing here (MongoDB and mongomock differ on whether a
missing group key is kept), so merging by the normalised key is also what makes the two
backends return identical rows. Groups that counted nothing are dropped: mongomock
returns one all-zero group for `{_id: {}}` over no documents, MongoDB returns none.

Durations (latencies, session and sub-task lengths) are rounded to the millisecond here,
and only here (`mindstore.model.base.to_ms`): the server subtracts stored timestamps
exactly, and the difference of two millisecond timestamps carries binary noise
(0.30000001192 for 0.3) that would otherwise show in rows and split one value into
several histogram entries.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from mindstore.analytics.periods import Period, period_key
from mindstore.analytics.rows import (
    ActiveOwnersRow,
    ActivityRow,
    HistogramBin,
    LatencyRow,
    OwnerRow,
    SessionReport,
    SubtaskRow,
    ToolRow,
    UsageRow,
)
from mindstore.analytics.stats import distribution
from mindstore.model.base import to_ms

USAGE_SUMS = ("messages", "tokens_in", "tokens_out", "cache_reads", "cache_writes")
LENGTH_EDGES: tuple[int, ...] = (0, 1, 10, 25, 50, 100, 250, 500, 1000)
"""Session-length histogram bins: [0, 1), [1, 10), ... [1000, inf)."""


def _number(value: Any) -> float:
    """Sums of missing usage come back as 0 or null; anything non-numeric counts as 0."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _sort_key(values: Sequence[Any]) -> tuple[Any, ...]:
    return tuple((value is not None, value if value is not None else "") for value in values)


def _group_key(
    raw: Mapping[str, Any], dims: Sequence[str], period: Period | None
) -> tuple[Any, ...]:
    return tuple(
        period_key(raw.get("period"), period) if d == "period" else raw.get(d) for d in dims
    )


def fold_usage(groups: Iterable[Mapping[str, Any]], dims: Sequence[str],
               period: Period | None) -> list[UsageRow]:  # fmt: skip
    merged: dict[tuple[Any, ...], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for group in groups:
        if not _number(group.get("messages")):
            continue
        key = _group_key(group["_id"] or {}, dims, period)
        for name in (*USAGE_SUMS, "cost"):
            merged[key][name] += _number(group.get(name))
    rows = []
    for key, sums in sorted(merged.items(), key=lambda item: _sort_key(item[0])):
        fields: dict[str, Any] = dict(zip(dims, key, strict=True))
        fields.update({n: int(sums[n]) for n in USAGE_SUMS})
        rows.append(UsageRow(**fields, cost=round(sums["cost"], 9)))
    return rows


def fold_owners(groups: Iterable[Mapping[str, Any]]) -> list[OwnerRow]:
    """Top owners come sorted and limited by the server; only the shape changes here."""
    return [
        OwnerRow(
            owner=group.get("_id"),
            tasks=int(_number(group.get("tasks"))),
            **{n: int(_number(group.get(n))) for n in USAGE_SUMS},
            cost=round(_number(group.get("cost")), 9),
        )
        for group in groups
        if _number(group.get("messages"))
    ]


def fold_latency(groups: Iterable[Mapping[str, Any]], dims: Sequence[str],
                 period: Period | None) -> list[LatencyRow]:  # fmt: skip
    histograms: dict[tuple[Any, ...], dict[float, int]] = defaultdict(lambda: defaultdict(int))
    for group in groups:
        raw = group["_id"] or {}
        latency = raw.get("latency")
        if not isinstance(latency, (int, float)) or latency < 0:
            continue  # a finish before the start is a clock error, not a latency
        histograms[_group_key(raw, dims, period)][to_ms(latency)] += int(group.get("count", 0))
    rows = []
    for key, counts in sorted(histograms.items(), key=lambda item: _sort_key(item[0])):
        summary = distribution(counts)
        rows.append(LatencyRow(**dict(zip(dims, key, strict=True)), **summary.model_dump()))
    return rows


def fold_tools(groups: Iterable[Mapping[str, Any]], dims: Sequence[str],
               period: Period | None) -> list[ToolRow]:  # fmt: skip
    keys = ("tool", *dims)
    merged: dict[tuple[Any, ...], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for group in groups:
        if not (_number(group.get("calls")) or _number(group.get("results"))):
            continue
        key = _group_key(group["_id"] or {}, keys, period)
        for name in ("calls", "results", "errors"):
            merged[key][name] += int(_number(group.get(name)))
    rows = []
    for key, sums in sorted(merged.items(), key=lambda item: _sort_key(item[0])):
        rate = sums["errors"] / sums["results"] if sums["results"] else None
        rows.append(
            ToolRow(
                **dict(zip(keys, key, strict=True)),
                calls=sums["calls"],
                results=sums["results"],
                errors=sums["errors"],
                error_rate=rate,
            )
        )
    return rows


def session_duration(raw: Mapping[str, Any]) -> float | None:
    """Last own message's end (its finish, else its start) minus the first one's start."""
    first = raw.get("first")
    ends = [
        v
        for v in (raw.get("last_started"), raw.get("last_finished"))
        if isinstance(v, (int, float))
    ]
    if not isinstance(first, (int, float)) or not ends:
        return None
    return to_ms(max(ends) - first)


def length_bins(
    lengths: Mapping[int, int], edges: Sequence[int] = LENGTH_EDGES
) -> list[HistogramBin]:
    bins = []
    for position, low in enumerate(edges):
        high = edges[position + 1] if position + 1 < len(edges) else None
        count = sum(
            n for length, n in lengths.items() if length >= low and (high is None or length < high)
        )
        bins.append(HistogramBin(low=low, high=high, sessions=count))
    return bins


def fold_sessions(groups: Iterable[Mapping[str, Any]]) -> SessionReport:
    lengths: dict[int, int] = defaultdict(int)
    durations: dict[float, int] = defaultdict(int)
    for group in groups:
        raw, count = group["_id"] or {}, int(group.get("count", 0))
        messages = int(_number(raw.get("messages")))
        lengths[messages] += count
        duration = session_duration(raw) if messages else None
        if duration is not None:
            durations[duration] += count
    return SessionReport(
        sessions=sum(lengths.values()),
        messages=distribution(lengths),
        duration=distribution(durations),
        length_histogram=length_bins(lengths),
    )


def fold_subtasks(groups: Iterable[Mapping[str, Any]]) -> list[SubtaskRow]:
    by_depth: dict[int, dict[str, Any]] = {}
    for group in groups:
        raw = group["_id"] or {}
        if not _number(group.get("spans")):
            continue
        depth = int(_number(raw.get("depth")))
        entry = by_depth.setdefault(
            depth, {"spans": 0, "open": 0, "messages": 0, "durations": defaultdict(int)}
        )
        spans = int(_number(group.get("spans")))
        entry["spans"] += spans
        entry["messages"] += int(_number(group.get("messages")))
        duration = raw.get("duration")
        if isinstance(duration, (int, float)):
            entry["durations"][to_ms(duration)] += spans
        else:
            entry["open"] += spans
    return [
        SubtaskRow(
            depth=depth,
            spans=e["spans"],
            finished=e["spans"] - e["open"],
            open=e["open"],
            messages=e["messages"],
            duration=distribution(e["durations"]),
        )
        for depth, e in sorted(by_depth.items())
    ]


def _owner_sets(
    message_groups: Iterable[Mapping[str, Any]], period: Period | None
) -> tuple[dict[str | None, dict[str, int]], dict[str | None, set[str | None]]]:
    by_role: dict[str | None, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    owners: dict[str | None, set[str | None]] = defaultdict(set)
    for group in message_groups:
        raw = group["_id"] or {}
        key = period_key(raw.get("day"), period)
        count = int(_number(group.get("messages")))
        by_role[key][str(raw.get("role"))] += count
        if count:
            owners[key].add(raw.get("owner"))
    return by_role, owners


def fold_activity(
    message_groups: Iterable[Mapping[str, Any]],
    task_groups: Iterable[Mapping[str, Any]],
    period: Period | None,
) -> list[ActivityRow]:
    by_role, owners = _owner_sets(message_groups, period)
    created: dict[str | None, int] = defaultdict(int)
    for group in task_groups:
        raw = group["_id"] or {}
        key = None
        if period is not None and all(
            isinstance(raw.get(k), int) for k in ("year", "month", "day")
        ):
            day = datetime(raw["year"], raw["month"], raw["day"], tzinfo=UTC)
            key = period_key(day.timestamp(), period)
        created[key] += int(_number(group.get("tasks")))
    rows = []
    for key in sorted(set(by_role) | set(created), key=lambda k: _sort_key([k])):
        roles = dict(sorted(by_role.get(key, {}).items()))
        rows.append(
            ActivityRow(
                period=key,
                tasks_created=created.get(key, 0),
                messages=sum(roles.values()),
                active_owners=len(owners.get(key, ())),
                by_role=roles,
            )
        )
    return rows


def fold_active_owners(
    message_groups: Iterable[Mapping[str, Any]], period: Period | None
) -> list[ActiveOwnersRow]:
    _, owners = _owner_sets(message_groups, period)
    return [
        ActiveOwnersRow(
            period=key, active_owners=len(found), owners=sorted(found, key=lambda o: _sort_key([o]))
        )
        for key, found in sorted(owners.items(), key=lambda item: _sort_key([item[0]]))
    ]
