"""Plain-Python reference computations of every analytics report (the tests' oracle).

Written from the documented semantics (docs/analytics.md), over parsed messages and the
model layer's own helpers (`message_usage`, `views.sub_task_spans`), with no pipeline and
no folding code: percentiles are computed from sorted lists, periods from `datetime`,
durations from the exact difference of the stored timestamps (`Fraction`) rounded to the
millisecond, means from `math.fsum`. The report tests compare `acme.analytics.*` with these
on the same stored data.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

from mindstore.model.levels import sub_task_spans
from mindstore.model.messages import AnyMessage, parse_messages
from mindstore.model.parts import ErrorPart, TaskEntryPart, ToolCallPart, ToolResultPart
from mindstore.model.plans import message_usage
from mindstore.model.storage_form import unescape_keys


@dataclass(frozen=True)
class Filters:
    owner: str | None = None
    state: str | None = None
    model: str | None = None
    since: float | None = None
    until: float | None = None

    def as_kwargs(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}

    def in_range(self, ts: Any) -> bool:
        """Timed semantics: a numeric, non-negative time inside [since, until)."""
        if not is_number(ts):
            return False
        low = self.since if self.since is not None else 0
        return ts >= low and (self.until is None or ts < self.until)

    @property
    def ranged(self) -> bool:
        return self.since is not None or self.until is not None


@dataclass
class StoredTask:
    doc: dict[str, Any]
    messages: list[AnyMessage]

    @property
    def owner(self) -> str | None:
        return self.doc.get("owner")

    @property
    def root_model(self) -> str | None:
        if self.doc.get("root_model_name") is not None:
            return self.doc["root_model_name"]
        return self.doc.get("last_model_name")

    def own(self) -> list[AnyMessage]:
        return [m for m in self.messages if getattr(m, "origin", None) is None]


def stored_value(message: AnyMessage, name: str) -> Any:
    """A field as stored (an unknown message's properties default what they cannot read)."""
    raw = getattr(message, "raw", None)
    return raw.get(name) if isinstance(raw, dict) else getattr(message, name, None)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def stored_tasks(documents: Iterable[dict[str, Any]], tenant: str) -> list[StoredTask]:
    return [
        StoredTask(doc, parse_messages([unescape_keys(m) for m in doc.get("messages", [])]))
        for doc in documents
        if doc.get("tenant") == tenant
    ]


def _selected(tasks: list[StoredTask], f: Filters, *, root_model: bool = False,
              created: bool = False) -> list[StoredTask]:  # fmt: skip
    out = []
    for task in tasks:
        if f.owner is not None and task.owner != f.owner:
            continue
        if f.state is not None and task.doc.get("state") != f.state:
            continue
        if root_model and f.model is not None and task.root_model != f.model:
            continue
        if created and f.ranged:
            created_at = task.doc["created_at"]
            if created_at.tzinfo is None:
                created_at = created_at.replace(tzinfo=UTC)
            ts = created_at.timestamp()
            if (f.since is not None and ts < f.since) or (f.until is not None and ts >= f.until):
                continue
        out.append(task)
    return out


def period_label(ts: float, period: str | None) -> str | None:
    if period is None:
        return None
    day = datetime.fromtimestamp(ts, tz=UTC).date()
    if period == "day":
        return day.isoformat()
    if period == "week":
        year, week = day.isocalendar()[:2]
        return f"{year}-W{week:02d}"
    return f"{day.year}-{day.month:02d}"


def duration(start: float, end: float) -> float:
    """Seconds from `start` to `end`, to the millisecond: the exact difference of the two
    stored numbers, rounded once (docs/analytics.md: durations are reported in ms)."""
    return float(round(Fraction(end) - Fraction(start), 3))


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(p / 100 * len(ordered))) - 1]


def summary(values: list[float]) -> dict[str, Any]:
    if not values:
        return {
            "count": 0,
            "min": None,
            "max": None,
            "mean": None,
            "p50": None,
            "p90": None,
            "p99": None,
        }
    return {
        "count": len(values), "min": min(values), "max": max(values),
        "mean": round(math.fsum(values) / len(values), 6),
        "p50": percentile(values, 50), "p90": percentile(values, 90), "p99": percentile(values, 99),
    }  # fmt: skip


def _key(values: dict[str, Any], dims: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple(values[d] for d in dims)


# ---------------------------------------------------------------- reports
def usage(tasks: list[StoredTask], f: Filters, dims: tuple[str, ...], period: str | None) -> dict:
    timed = "period" in dims or f.ranged
    out: dict[tuple[Any, ...], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for task in _selected(tasks, f):
        for m in task.own():
            if m.role != "assistant" and getattr(m, "usage", None) is None:
                continue
            if f.model is not None and getattr(m, "model_id", None) != f.model:
                continue
            if timed and not f.in_range(stored_value(m, "started_ts")):
                continue
            labels = {"period": period_label(m.started_ts, period) if timed else None,
                      "model": getattr(m, "model_id", None), "owner": task.owner}  # fmt: skip
            totals = out[_key(labels, dims)]
            used = message_usage(m)
            totals["messages"] += 1
            for name in ("tokens_in", "tokens_out", "cache_reads", "cache_writes", "cost"):
                totals[name] += getattr(used, name)
    return {key: dict(v) for key, v in out.items()}


def top_owners(
    tasks: list[StoredTask], f: Filters, limit: int, by: str
) -> list[tuple[str | None, dict]]:
    per_owner: dict[str | None, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    tasks_with_usage: dict[str | None, set[str]] = defaultdict(set)
    for (owner, task_id), sums in _usage_by_owner_task(tasks, f).items():
        tasks_with_usage[owner].add(task_id)
        for name, value in sums.items():
            per_owner[owner][name] += value
    ranked = sorted(
        per_owner.items(), key=lambda item: (-item[1][by], item[0] is not None, item[0] or "")
    )
    return [
        (owner, {**sums, "tasks": len(tasks_with_usage[owner])}) for owner, sums in ranked[:limit]
    ]


def _usage_by_owner_task(
    tasks: list[StoredTask], f: Filters
) -> dict[tuple[str | None, str], dict[str, float]]:
    out: dict[tuple[str | None, str], dict[str, float]] = {}
    for task in _selected(tasks, f):
        one = usage([task], f, ("owner",), None)
        for (owner,), sums in one.items():
            out[(owner, task.doc["_id"])] = sums
    return out


def latency(tasks: list[StoredTask], f: Filters, dims: tuple[str, ...], period: str | None) -> dict:
    values: dict[tuple[Any, ...], list[float]] = defaultdict(list)
    for task in _selected(tasks, f):
        for m in task.own():
            if m.role != "assistant" or not f.in_range(stored_value(m, "started_ts")):
                continue
            if f.model is not None and m.model_id != f.model:
                continue
            if not isinstance(m.finished_ts, (int, float)) or m.finished_ts < 0:
                continue
            if m.finished_ts < m.started_ts:
                continue
            value = duration(m.started_ts, m.finished_ts)
            labels = {
                "period": period_label(m.started_ts, period),
                "model": m.model_id,
                "owner": task.owner,
            }
            values[_key(labels, dims)].append(value)
    return {key: summary(v) for key, v in values.items()}


def tools(tasks: list[StoredTask], f: Filters, dims: tuple[str, ...], period: str | None) -> dict:
    out: dict[tuple[Any, ...], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for task in _selected(tasks, f):
        units: dict[Any, dict[str, Any]] = defaultdict(dict)
        for m in task.own():
            if m.role not in ("assistant", "tool"):
                continue
            failed_message = any(isinstance(p, ErrorPart) for p in m.content)
            for part in m.content:
                if isinstance(part, ToolCallPart):
                    unit = units[part.tool_call_id]
                    unit.setdefault("names", set()).add(part.tool_name)
                    unit["call_ts"] = min(unit.get("call_ts", math.inf), m.started_ts)
                    unit["model"] = max(
                        filter(None, [unit.get("model"), getattr(m, "model_id", None)]),
                        default=None,
                    )
                elif isinstance(part, ToolResultPart):
                    unit = units[part.tool_call_id]
                    unit.setdefault("names", set()).add(part.tool_name)
                    unit["result_ts"] = min(unit.get("result_ts", math.inf), m.started_ts)
                    unit["error"] = unit.get("error", False) or part.is_error or failed_message
        for unit in units.values():
            ts = unit.get("call_ts", unit.get("result_ts"))
            if ("period" in dims or f.ranged) and not f.in_range(ts):
                continue
            if f.model is not None and unit.get("model") != f.model:
                continue
            labels = {"period": period_label(ts, period) if "period" in dims else None,
                      "model": unit.get("model")}  # fmt: skip
            totals = out[(max(unit["names"]), *_key(labels, dims))]
            totals["calls"] += "call_ts" in unit
            totals["results"] += "result_ts" in unit
            totals["errors"] += bool(unit.get("error"))
    return {key: dict(v) for key, v in out.items()}


def sessions(tasks: list[StoredTask], f: Filters) -> dict[str, Any]:
    lengths, durations = [], []
    for task in _selected(tasks, f, root_model=True, created=True):
        own = task.own()
        lengths.append(len(own))
        starts = [
            stored_value(m, "started_ts") for m in own if is_number(stored_value(m, "started_ts"))
        ]
        ends = starts + [stored_value(m, "finished_ts") for m in own
                         if is_number(stored_value(m, "finished_ts"))]  # fmt: skip
        if starts:
            durations.append(duration(min(starts), max(ends)))
    return {"sessions": len(lengths), "messages": summary(lengths), "duration": summary(durations),
            "lengths": lengths}  # fmt: skip


def subtasks(tasks: list[StoredTask], f: Filters) -> dict[int, dict[str, Any]]:
    by_depth: dict[int, dict[str, Any]] = {}
    for task in _selected(tasks, f):
        own = task.own()
        models = {m.id: [p.initial_task_config.model_name for p in m.content
                         if isinstance(p, TaskEntryPart)]
                  for m in own if m.role == "taskentry"}  # fmt: skip
        for span in sub_task_spans(own):
            if f.ranged and not f.in_range(span.started_ts):
                continue
            if f.model is not None and f.model not in models[span.entry_id]:
                continue
            entry = by_depth.setdefault(
                span.depth, {"spans": 0, "open": 0, "messages": 0, "durations": []}
            )
            entry["spans"] += 1
            entry["messages"] += span.message_count
            if span.duration is None:
                entry["open"] += 1
            else:
                entry["durations"].append(duration(span.started_ts, span.finished_ts))
    return {depth: {"spans": e["spans"], "open": e["open"], "messages": e["messages"],
                    "duration": summary(e["durations"])}
            for depth, e in by_depth.items()}  # fmt: skip


def activity(
    tasks: list[StoredTask], f: Filters, period: str | None
) -> dict[str | None, dict[str, Any]]:
    rows: dict[str | None, dict[str, Any]] = defaultdict(
        lambda: {"tasks_created": 0, "by_role": defaultdict(int), "owners": set()}
    )
    for task in _selected(tasks, f, root_model=True):
        for m in task.own():
            if not f.in_range(stored_value(m, "started_ts")):
                continue
            row = rows[period_label(m.started_ts, period)]
            row["by_role"][str(m.role)] += 1
            row["owners"].add(task.owner)
    for task in _selected(tasks, f, root_model=True, created=True):
        created_at = task.doc["created_at"]
        if created_at.tzinfo is None:
            created_at = created_at.replace(tzinfo=UTC)
        rows[period_label(created_at.timestamp(), period)]["tasks_created"] += 1
    return dict(rows)
