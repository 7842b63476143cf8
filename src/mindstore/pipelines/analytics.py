"""Aggregation pipelines for analytics over all of a tenant's sessions (pure builders).

Every report starts from the tasks of one tenant (optionally one owner and state),
narrows each task to the message fields it needs, unwinds the messages and groups them.
Three rules hold for all of them:

* **Copies are never counted.** A fork copies the messages it keeps and marks each copy
  with `origin`; only messages whose `origin` is null (the task's own) are counted, so a
  shared prefix counts once, in the task that wrote it.
* **Time is bucketed by day on the server**, as epoch seconds of the UTC day start
  (`ts - ts mod 86400`), because `$dateTrunc`/`$isoWeek`/`$toDate` are outside the portable
  subset (docs/design.md). `$mod` of a float timestamp (milliseconds) is exact, so the day
  start is a whole number for int and float timestamps alike. `mindstore.analytics` rolls
  days up into weeks and months, which is exact for sums, counts and distinct sets.
* **Percentiles are exact and computed client-side.** `$percentile` is not portable, so
  the server returns a value histogram (value -> count) per group, which is as small as
  the number of distinct values and gives exact nearest-rank percentiles. Durations are
  exact differences here; `mindstore.analytics.folding` rounds them to the millisecond
  (two millisecond timestamps subtract to the value plus binary noise, at most two
  variants of each millisecond value, which the rounding merges).

Operators: the portable subset of docs/design.md plus the standard extras listed in
`mindstore.portable` (`$sum`, `$min`, `$max`, `$mod`, `$subtract`, `$ifNull`, `$gt`,
`$gte`, `$lt`, `$in`, `$or`, `$and`). Two embedded-backend traps shape the expressions:
comparisons against null only inside `$cond` (never as a `$filter` condition, where
mongomock drops the field), and `$ifNull` around arrays handed to `$filter`.

Lean messages leave fields at their default out (docs/data-model.md, "Reading lean fields
in queries"): expressions read them through `_field` (`$ifNull` with the default), so lean
documents and those stored before give the same rows.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from mindstore.errors import ValidationError
from mindstore.pipelines import boundaries as spans

Pipeline = list[dict[str, Any]]

DAY_SECONDS = 86400
GROUP_DIMENSIONS = ("period", "model", "owner")
"""What usage and latency rows can be grouped by (any combination)."""
TOOL_DIMENSIONS = ("period", "model")
"""What tool rows can be grouped by besides the tool (a call has no owner of its own)."""


@dataclass(frozen=True)
class ReportFilter:
    """Which sessions a report covers.

    `since` (inclusive) and `until` (exclusive) are epoch seconds. They select messages by
    `started_ts` in message reports, tool calls by the call's time, sub-tasks by their
    entry's time, and tasks by `created_at` in task reports (sessions, tasks created).
    `model` selects assistant messages by `model_id` (usage, latency), tool calls by the
    model of the message that made them, sub-tasks by the model of their own config, and
    tasks by their root config's model (sessions, activity).
    """

    tenant: str
    owner: str | None = None
    state: str | None = None
    model: str | None = None
    since: float | None = None
    until: float | None = None
    task_keys: tuple[str, ...] | None = None
    """Only these tasks (stored `_id`s): an incremental reader's batch."""

    def __post_init__(self) -> None:
        if self.task_keys is not None and not (
            isinstance(self.task_keys, tuple) and all(isinstance(k, str) for k in self.task_keys)
        ):
            raise ValidationError("task_keys must be a tuple of stored task ids")
        for name in ("tenant", "owner", "state", "model"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise ValidationError(f"{name} must be a string, got {type(value).__name__}")
        for name in ("since", "until"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float))
            ):
                raise ValidationError(f"{name} must be epoch seconds, got {type(value).__name__}")
        if self.since is not None and self.until is not None and self.until <= self.since:
            raise ValidationError("until must be later than since")


# ---------------------------------------------------------------- shared stages
def _task_match(f: ReportFilter, *, by_root_model: bool = False, by_created: bool = False,
                by_message_time: bool = False) -> dict[str, Any]:  # fmt: skip
    """The tasks a report reads. `by_message_time` keeps only tasks with some message
    started in the range: a superset of what the message filter after `$unwind` keeps
    (on an array the two bounds may be met by different messages), so it is exact, and it
    lets a `(tenant, messages.started_ts)` index (docs/analytics.md) skip idle tasks."""
    query: dict[str, Any] = {}
    if f.task_keys is not None:  # first: the embedded backend looks ids up by key
        query["_id"] = {"$in": list(f.task_keys)}
    query["tenant"] = f.tenant
    if f.owner is not None:
        query["owner"] = f.owner
    if f.state is not None:
        query["state"] = f.state
    if by_root_model and f.model is not None:
        query["$or"] = [
            {"root_model_name": f.model},
            {"root_model_name": None, "last_model_name": f.model},
        ]
    if by_created and (f.since is not None or f.until is not None):
        query["created_at"] = _range(_as_datetime(f.since), _as_datetime(f.until))
    if by_message_time and (f.since is not None or f.until is not None):
        query["messages.started_ts"] = _range(f.since, f.until)
    return {"$match": query}


def _as_datetime(ts: float | None) -> datetime | None:
    return None if ts is None else datetime.fromtimestamp(ts, tz=UTC)


def _range(low: Any, high: Any) -> dict[str, Any]:
    bounds: dict[str, Any] = {}
    if low is not None:
        bounds["$gte"] = low
    if high is not None:
        bounds["$lt"] = high
    return bounds


def _narrow(fields: Iterable[str], top: Iterable[str] = ("owner",)) -> dict[str, Any]:
    """Keep only the message fields a report reads, before `$unwind` copies them around."""
    projection: dict[str, Any] = dict.fromkeys(top, 1)
    projection.update({f"messages.{name}": 1 for name in ("origin", "started_ts", *fields)})
    return {"$project": projection}


def _own_messages(f: ReportFilter, *, timed: bool, **conditions: Any) -> list[dict[str, Any]]:
    """Unwind the messages and keep the task's own ones (not fork copies) that match.

    `timed` adds the `[since, until)` range on `started_ts`, and also requires a numeric
    `started_ts` (range comparisons only match numbers) so it can be bucketed by day.
    """
    query: dict[str, Any] = {"messages.origin": None}
    if timed:
        query["messages.started_ts"] = _range(f.since if f.since is not None else 0, f.until)
    query.update({f"messages.{name}": value for name, value in conditions.items()})
    return [{"$unwind": "$messages"}, {"$match": query}]


def day_of(path: str) -> dict[str, Any]:
    """Epoch seconds of the UTC day that `path` (epoch seconds) falls in."""
    return {"$subtract": [path, {"$mod": [path, DAY_SECONDS]}]}


def _check_dimensions(group_by: Iterable[str], allowed: tuple[str, ...]) -> tuple[str, ...]:
    dims = tuple(dict.fromkeys(group_by))
    unknown = [d for d in dims if d not in allowed]
    if unknown:
        raise ValidationError(f"cannot group by {unknown}; choose from {list(allowed)}")
    return dims


def _field(path: str, default: Any = None) -> dict[str, Any]:
    """A stored field inside an expression, `default` when the lean form left it out."""
    return {"$ifNull": [path, default]}


def _message_groups() -> dict[str, Any]:
    """What an unwound message is grouped by, per dimension (usage, latency)."""
    return {
        "period": day_of("$messages.started_ts"),
        "model": _field("$messages.model_id"),
        "owner": "$owner",
    }


def _key(dims: Iterable[str], sources: dict[str, Any]) -> dict[str, Any]:
    return {dim: sources[dim] for dim in dims}


# ---------------------------------------------------------------- usage and cost
USAGE_FIELDS = {
    "tokens_in": ("input_tokens", "tokens_in"),
    "tokens_out": ("output_tokens", "tokens_out"),
    "cache_reads": ("cache_read_tokens", "cache_reads"),
    "cache_writes": ("cache_write_tokens", "cache_writes"),
    "cost": ("cost.total", "cost"),
}
"""Report field -> (path inside a message-layer `usage` object, Mind Map assistant field)."""
USAGE_ZERO: dict[str, Any] = {"cost": 0.0}
"""What a usage field left out reads as (a count 0, a cost 0.0: sums keep their type)."""


def _usage_values() -> dict[str, Any]:
    """A message's usage as the store rolls it up: its `usage` object if set, else the
    Mind Map fields of an assistant message (`mindstore.model.plans.message_usage`)."""
    has_object = {"$gt": [_field("$messages.usage"), None]}
    return {
        name: {
            "$cond": [
                has_object,
                _field(f"$messages.usage.{inner}", USAGE_ZERO.get(name, 0)),
                _field(f"$messages.{flat}", USAGE_ZERO.get(name, 0)),
            ]
        }
        for name, (inner, flat) in USAGE_FIELDS.items()
    }


def _usage_stages(
    f: ReportFilter, dims: tuple[str, ...], extra_key: dict[str, Any] | None = None
) -> Pipeline:
    conditions: dict[str, Any] = {}
    if f.model is not None:
        conditions["model_id"] = f.model
    fields = ("role", "model_id", "usage", *(flat for _, flat in USAGE_FIELDS.values()))
    stages: Pipeline = [
        _task_match(f, by_message_time=True),
        _narrow(fields),
        *_own_messages(f, timed="period" in dims or f.since is not None or f.until is not None,
                       **conditions),
        # messages that carry usage: every assistant turn, and any message with a usage object
        {"$match": {"$or": [{"messages.role": "assistant"}, {"messages.usage": {"$ne": None}}]}},
    ]  # fmt: skip
    key = _key(dims, _message_groups())
    key.update(extra_key or {})
    values = _usage_values()
    stages.append(
        {
            "$group": {
                "_id": key,
                "messages": {"$sum": 1},
                **{name: {"$sum": expression} for name, expression in values.items()},
            }
        }
    )
    return stages


def usage_pipeline(f: ReportFilter, group_by: Iterable[str] = ("model",)) -> Pipeline:
    """Tokens in/out, cache reads/writes and cost, grouped by any of period (day), model
    and owner. Rows: `{_id: {period?, model?, owner?}, messages, tokens_in, ...}`."""
    return _usage_stages(f, _check_dimensions(group_by, GROUP_DIMENSIONS))


def top_owners_pipeline(f: ReportFilter, limit: int = 10, by: str = "cost") -> Pipeline:
    """Owners ranked by cost (or tokens), with how many tasks their usage came from."""
    if by not in USAGE_FIELDS:
        raise ValidationError(f"cannot rank owners by {by!r}; choose from {list(USAGE_FIELDS)}")
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 10_000:
        raise ValidationError("limit must be an integer between 1 and 10000")
    per_task = _usage_stages(f, ("owner",), extra_key={"task": "$_id"})
    totals = {name: {"$sum": f"${name}"} for name in ("messages", *USAGE_FIELDS)}
    return [
        *per_task,
        {"$group": {"_id": "$_id.owner", "tasks": {"$sum": 1}, **totals}},
        {"$sort": {by: -1, "_id": 1}},
        {"$limit": limit},
    ]


# ---------------------------------------------------------------- latency
def latency_pipeline(f: ReportFilter, group_by: Iterable[str] = ("model",)) -> Pipeline:
    """Assistant response time (`finished_ts - started_ts`, seconds, unrounded: the fold
    rounds it to the millisecond) as a value histogram per group: rows
    `{_id: {period?, model?, owner?, latency}, count}`."""
    dims = _check_dimensions(group_by, GROUP_DIMENSIONS)
    conditions: dict[str, Any] = {"role": "assistant", "finished_ts": {"$gte": 0}}
    if f.model is not None:
        conditions["model_id"] = f.model
    latency = {"$subtract": ["$messages.finished_ts", "$messages.started_ts"]}
    return [
        _task_match(f, by_message_time=True),
        _narrow(("role", "model_id", "finished_ts")),
        *_own_messages(f, timed=True, **conditions),
        {
            "$group": {
                "_id": {**_key(dims, _message_groups()), "latency": latency},
                "count": {"$sum": 1},
            }
        },
    ]


# ---------------------------------------------------------------- tools
def _parts_of(content: Any, *types: str) -> dict[str, Any]:
    """The parts of a message's `content` whose type is one of `types` (an expression)."""
    matches = [{"$eq": ["$$p.type", kind]} for kind in types]
    cond = matches[0] if len(matches) == 1 else {"$or": matches}
    return {"$filter": {"input": content, "as": "p", "cond": cond}}


def tools_pipeline(f: ReportFilter, group_by: Iterable[str] = ()) -> Pipeline:
    """Tool calls by tool name, with results and errors; optionally by period and model.

    The unit is one tool call id within a task: its call (an assistant `toolCall` part)
    and its result (a `toolResult` part). A result is an error when it has `is_error` or
    its message carries an `error` part. The unit's time and model are its call's (its
    result's time when the call is not the task's own). Rows:
    `{_id: {tool, period?, model?}, calls, results, errors}`.
    """
    dims = _check_dimensions(group_by, TOOL_DIMENSIONS)
    content = {"$ifNull": ["$messages.content", []]}
    is_call = {"$eq": ["$part.type", "toolCall"]}
    is_result = {"$eq": ["$part.type", "toolResult"]}
    failed = {"$or": [{"$eq": [_field("$part.is_error", False), True]}, "$error_part"]}
    stages: Pipeline = [
        _task_match(f, by_message_time=True),
        _narrow(
            (
                "role",
                "model_id",
                "content.type",
                "content.tool_call_id",
                "content.tool_name",
                "content.is_error",
            ),
            top=(),
        ),
        *_own_messages(f, timed=False),
        {"$match": {"messages.role": {"$in": ["assistant", "tool"]}}},
        {
            "$project": {
                "ts": "$messages.started_ts",
                "model": _field("$messages.model_id"),
                "error_part": {"$gt": [{"$size": _parts_of(content, "error")}, 0]},
                "part": _parts_of(content, "toolCall", "toolResult"),
            }
        },
        {"$unwind": "$part"},
        {
            "$group": {
                "_id": {"task": "$_id", "call": "$part.tool_call_id"},
                "tool": {"$max": "$part.tool_name"},
                "calls": {"$max": {"$cond": [is_call, 1, 0]}},
                "results": {"$max": {"$cond": [is_result, 1, 0]}},
                "errors": {"$max": {"$cond": [{"$and": [is_result, failed]}, 1, 0]}},
                "call_ts": {"$min": {"$cond": [is_call, "$ts", None]}},
                "result_ts": {"$min": {"$cond": [is_result, "$ts", None]}},
                "model": {"$max": {"$cond": [is_call, "$model", None]}},
            }
        },
        {
            "$project": {
                "tool": 1,
                "calls": 1,
                "results": 1,
                "errors": 1,
                "model": 1,
                "ts": {"$cond": [{"$gt": ["$call_ts", None]}, "$call_ts", "$result_ts"]},
            }
        },
    ]
    unit_match: dict[str, Any] = {}
    if f.since is not None or f.until is not None or "period" in dims:
        unit_match["ts"] = _range(f.since if f.since is not None else 0, f.until)
    if f.model is not None:
        unit_match["model"] = f.model
    if unit_match:
        stages.append({"$match": unit_match})
    sources = {"period": day_of("$ts"), "model": "$model"}
    stages.append(
        {
            "$group": {
                "_id": {"tool": "$tool", **_key(dims, sources)},
                "calls": {"$sum": "$calls"},
                "results": {"$sum": "$results"},
                "errors": {"$sum": "$errors"},
            }
        }
    )
    return stages


# ---------------------------------------------------------------- sessions
def sessions_pipeline(f: ReportFilter) -> Pipeline:
    """Per-session length (own messages) and duration, as a histogram of
    `{_id: {messages, first, last_started, last_finished}, count}` rows.

    Tasks with no own message (an untouched fork) are kept, with `messages: 0`.
    """
    copied = {"$gt": [_field("$messages.origin"), None]}
    present = {"$gt": ["$messages", None]}
    own = {"$cond": [copied, False, present]}

    def own_number(path: str) -> dict[str, Any]:
        # `$min`/`$max` order mixed types the BSON way (a text timestamp beats any number)
        return {"$cond": [{"$and": [own, {"$isNumber": path}]}, path, None]}

    return [
        _task_match(f, by_root_model=True, by_created=True),
        _narrow(("finished_ts",), top=()),
        {"$unwind": {"path": "$messages", "preserveNullAndEmptyArrays": True}},
        {
            "$group": {
                "_id": "$_id",
                "messages": {"$sum": {"$cond": [own, 1, 0]}},
                "first": {"$min": own_number("$messages.started_ts")},
                "last_started": {"$max": own_number("$messages.started_ts")},
                "last_finished": {"$max": own_number("$messages.finished_ts")},
            }
        },
        {
            "$group": {
                "_id": {
                    "messages": "$messages",
                    "first": "$first",
                    "last_started": "$last_started",
                    "last_finished": "$last_finished",
                },
                "count": {"$sum": 1},
            }
        },
    ]


# ---------------------------------------------------------------- sub-tasks
def subtasks_pipeline(f: ReportFilter) -> Pipeline:
    """Sub-task spans of every task (the spans of `pipelines.boundaries`, over all tasks),
    as a histogram `{_id: {depth, duration}, spans, messages}`; `duration` is null for a
    sub-task that has not exited. Only spans whose entry is the task's own count."""
    stages: Pipeline = [
        _task_match(f, by_message_time=True),
        _narrow(("id", "role", "scope", "depth", "content.initial_task_config.model_name"), top=()),
        *_own_messages(f, timed=False),
        spans.span_members(),
        {
            "$group": {
                "_id": {"task": "$_id", "span": spans.SPAN_ID},
                "entered": {"$max": {"$cond": [spans.IS_ENTRY, 1, 0]}},
                "model": {
                    "$max": {
                        "$cond": [
                            spans.IS_ENTRY,
                            "$messages.content.initial_task_config.model_name",
                            None,
                        ]
                    }
                },
                **spans.span_accumulators(),
            }
        },
    ]
    span_match: dict[str, Any] = {"entered": 1}
    if f.since is not None or f.until is not None:
        span_match["started_ts"] = _range(f.since if f.since is not None else 0, f.until)
    if f.model is not None:
        span_match["model"] = f.model  # an array of the entry's config models
    stages.append({"$match": span_match})
    duration = {"$cond": [{"$gt": ["$finished_ts", None]},
                          {"$subtract": ["$finished_ts", "$started_ts"]}, None]}  # fmt: skip
    stages.append(
        {
            "$group": {
                "_id": {"depth": "$depth", "duration": duration},
                "spans": {"$sum": 1},
                "messages": {"$sum": "$message_count"},
            }
        }
    )
    return stages


# ---------------------------------------------------------------- activity
def message_activity_pipeline(f: ReportFilter) -> Pipeline:
    """Own messages per day, role and owner: message counts by role and period, and the
    owners active in each period. Rows `{_id: {day, role, owner}, messages}`."""
    return [
        _task_match(f, by_root_model=True, by_message_time=True),
        _narrow(("role",)),
        *_own_messages(f, timed=True),
        {
            "$group": {
                "_id": {
                    "day": day_of("$messages.started_ts"),
                    "role": "$messages.role",
                    "owner": "$owner",
                },
                "messages": {"$sum": 1},
            }
        },
    ]


def tasks_created_pipeline(f: ReportFilter) -> Pipeline:
    """Tasks created per UTC day (`$year`/`$month`/`$dayOfMonth` of `created_at`)."""
    return [
        _task_match(f, by_root_model=True, by_created=True),
        {
            "$group": {
                "_id": {
                    "year": {"$year": "$created_at"},
                    "month": {"$month": "$created_at"},
                    "day": {"$dayOfMonth": "$created_at"},
                },
                "tasks": {"$sum": 1},
            }
        },
    ]
