"""`mindstore stats usage | tools | latency | sessions | subtasks | owners | activity`.

A thin shell over `store.scoped(tenant).analytics`: the reports, their filters and their
validation live there (and are tested there); this module only turns options into
arguments and rows into `--format` output. Every command is read-only, so the store is
opened with `save=False` and a `--data` snapshot is never rewritten.

Arguments that can be checked without data (`--by`, `--period`) are checked before the
store is opened, so a typo does not cost a snapshot load; everything else (state, time
bounds, their order) is left to the analytics layer, whose `ValidationError` `run` turns
into one `error: ...` line and exit code 2. json and csv carry exactly the columns the
table shows, so a script sees what a person sees.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import (
    Annotated,
    Any,
    TypeVar,
)

import typer

from mindstore.analytics.periods import Period, to_period
from mindstore.analytics.rows import (
    ActivityRow,
    HistogramBin,
    SessionReport,
    SubtaskRow,
)
from mindstore.analytics.service import Analytics
from mindstore.commands.arguments import time_bound
from mindstore.commands.common import note_unknown_tenant, open_store, require_tenant, run
from mindstore.commands.output import OutputFormat, console, echo_json, render
from mindstore.errors import ValidationError
from mindstore.pipelines.analytics import (
    GROUP_DIMENSIONS,
    TOOL_DIMENSIONS,
    USAGE_FIELDS,
)

T = TypeVar("T")
Rows = list[dict[str, Any]]

GROUPS = tuple(d for d in GROUP_DIMENSIONS if d != "period")
"""What usage and latency can be grouped by besides time (time is `--period`)."""
TOOL_GROUPS = tuple(d for d in TOOL_DIMENSIONS if d != "period")
OWNER_RANKINGS = tuple(USAGE_FIELDS)

USAGE_MEASURES = ("messages", "tokens_in", "tokens_out", "cache_reads", "cache_writes", "cost")
LATENCY_MEASURES = ("count", "mean", "min", "p50", "p90", "p99", "max")
TOOL_MEASURES = ("calls", "results", "errors", "error_rate")
OWNER_COLUMNS = ("owner", "tasks", *USAGE_MEASURES)
SUMMARY_COLUMNS = ("measure", "count", "min", "mean", "p50", "p90", "p99", "max")
HISTOGRAM_CSV_COLUMNS = ("low", "high", "sessions")
SUBTASK_DURATION = ("p50", "p90", "p99", "max", "mean")
SUBTASK_COLUMNS = ("depth", "spans", "finished", "open", "messages",
                   *(f"duration_{name}" for name in SUBTASK_DURATION))  # fmt: skip
ACTIVITY_COLUMNS = ("period", "tasks_created", "messages", "active_owners")

NO_DATA = "no data for these filters"

Tenant = Annotated[
    str | None,
    typer.Option(
        "--tenant",
        envvar="MINDSTORE_TENANT",
        help="Tenant to report on (default: MINDSTORE_TENANT).",
    ),
]
Owner = Annotated[str | None, typer.Option("--owner", help="Only this owner's tasks.")]
State = Annotated[
    str | None,
    typer.Option(
        "--state", help="Only tasks in this state (running, completed, failed, paused, ...)."
    ),
]
Model = Annotated[str | None, typer.Option(
    "--model", help="Only this model (assistant turns, tool calls, sub-tasks or root tasks, "
                    "depending on the report).")]  # fmt: skip
Since = Annotated[str | None, typer.Option(
    "--since", help="From this time, inclusive: ISO 8601 (2026-10-05, 2026-10-05T12:00:00Z) "
                    "or epoch seconds.")]  # fmt: skip
Until = Annotated[
    str | None, typer.Option("--until", help="Up to this time, exclusive (same forms as --since).")
]
Format = Annotated[OutputFormat, typer.Option("--format", "-f", help="table, json or csv.")]
PeriodOption = Annotated[
    str | None,
    typer.Option("--period", help="Also bucket by time: day, week (ISO) or month (UTC)."),
]
By = Annotated[
    list[str] | None,
    typer.Option(
        "--by",
        metavar="GROUPS",
        help="Group by model and/or owner: comma-separated or repeated (default: model).",
    ),
]

stats_app = typer.Typer(
    help="Analyse a tenant's sessions: usage and cost, tools, latency, session sizes, "
    "sub-tasks, top owners and activity over time.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.add_typer(stats_app, name="stats")


# ---------------------------------------------------------------------- plumbing
def _filters(owner: str | None, state: str | None, model: str | None, since: str | None,
             until: str | None) -> dict[str, Any]:  # fmt: skip
    """The filters every report shares, as keyword arguments. The time bounds are parsed
    here (`arguments.time_bound`: NaN, infinities and years past 9999 are refused with the
    option's name); the analytics layer checks the rest and the order of the bounds."""
    bounds = _checked(lambda: (time_bound(since, "--since"), time_bound(until, "--until")))
    return {"owner": owner, "state": state, "model": model, "since": bounds[0], "until": bounds[1]}


def _checked(parse: Callable[[], T]) -> T:
    """Check an argument before the store is opened, failing exactly the way `run` does
    (one `error:` line, the error's exit code)."""

    async def parsed() -> T:
        return parse()

    return run(parsed())


def _dimensions(values: Sequence[str] | None, allowed: tuple[str, ...],
                default: tuple[str, ...]) -> tuple[str, ...]:  # fmt: skip
    """`--by model,owner` and `--by model --by owner` mean the same grouping; repeats are
    dropped and the user's order is kept, because it is the order of the columns."""
    if values is None:
        return default
    dims = tuple(
        dict.fromkeys(p.strip() for value in values for p in value.split(",") if p.strip())
    )
    unknown = [d for d in dims if d not in allowed]
    if unknown:
        hint = "; use --period to group by time" if "period" in unknown else ""
        raise ValidationError(f"cannot group by {', '.join(unknown)}; choose from "
                              f"{', '.join(allowed)}{hint}")  # fmt: skip
    return dims


def _ranking(by: str) -> str:
    if by not in OWNER_RANKINGS:
        raise ValidationError(
            f"cannot rank owners by {by!r}; choose from {', '.join(OWNER_RANKINGS)}"
        )
    return by


def _stderr_is_terminal() -> bool:
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty())


@contextmanager
def _working(report: str) -> Iterator[None]:
    """Reports over a large store take seconds, so a terminal gets a spinner; piped or
    captured stderr gets nothing, which keeps it clean for scripts and tests."""
    if not _stderr_is_terminal():
        yield
        return
    with console(stderr=True).status(f"computing {report} report…"):
        yield


def _report(ctx: typer.Context, tenant: str | None, report: str,
            query: Callable[[Analytics], Awaitable[T]]) -> T:  # fmt: skip
    """Run one report on the tenant's analytics. The tenant is checked inside `run` so a
    missing one fails like any other error; the spinner stops before `run` prints one."""

    async def body() -> T:
        name = require_tenant(tenant)
        with _working(report):
            async with open_store(ctx, save=False) as store:
                analytics = store.scoped(name).analytics  # checks the tenant id first
                await note_unknown_tenant(store, name)
                return await query(analytics)

    return run(body())


def _emit(
    rows: Iterable[Any],
    fmt: OutputFormat,
    *,
    title: str,
    columns: Sequence[str],
    table_cells: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> None:
    """Print rows cut to `columns` in every format (json included); `table_cells` only
    changes how values look to a person, never what json and csv carry."""
    projected = [{name: row.get(name) for name in columns} for row in rows]
    if fmt == OutputFormat.table:
        if not projected:
            typer.echo(NO_DATA, err=True)
        if table_cells is not None:
            projected = [table_cells(row) for row in projected]
    render(projected, fmt, title=title, columns=columns)


def _grouping_columns(period: Period | None, dims: Sequence[str]) -> tuple[str, ...]:
    return (*(("period",) if period is not None else ()), *dims)


def _dumped(rows: Iterable[Any]) -> Rows:
    return [row.model_dump(mode="json") for row in rows]


GroupedReport = Callable[[Analytics], Callable[..., Awaitable[list[Any]]]]


def _grouped(
    ctx: typer.Context,
    tenant: str | None,
    name: str,
    report: GroupedReport,
    by: Sequence[str] | None,
    period: str | None,
    filters: dict[str, Any],
    *,
    groups: tuple[str, ...],
    default: tuple[str, ...],
) -> tuple[Rows, tuple[str, ...]]:
    """(rows, their grouping columns) of a report grouped by `--by` and `--period`; usage,
    latency and tools differ only in which groupings they allow and what they measure."""
    dims = _checked(lambda: _dimensions(by, groups, default))
    bucket = _checked(lambda: to_period(period))
    rows = _report(
        ctx,
        tenant,
        name,
        lambda analytics: report(analytics)(group_by=dims, period=bucket, **filters),
    )
    return _dumped(rows), _grouping_columns(bucket, dims)


# ---------------------------------------------------------------------- usage
@stats_app.command("usage")
def usage_command(
    ctx: typer.Context,
    tenant: Tenant = None,
    by: By = None,
    period: PeriodOption = None,
    owner: Owner = None,
    state: State = None,
    model: Model = None,
    since: Since = None,
    until: Until = None,
    fmt: Format = OutputFormat.table,
) -> None:
    """Tokens in/out, cache reads/writes and cost, by model and/or owner.

    Counts assistant turns (and any message carrying usage).
    --period adds a time bucket.
    """
    rows, grouping = _grouped(ctx, tenant, "usage", lambda analytics: analytics.usage, by, period,
                              _filters(owner, state, model, since, until),
                              groups=GROUPS, default=("model",))  # fmt: skip
    _emit(rows, fmt, title="usage", columns=(*grouping, *USAGE_MEASURES))


# ---------------------------------------------------------------------- latency
@stats_app.command("latency")
def latency_command(
    ctx: typer.Context,
    tenant: Tenant = None,
    by: By = None,
    period: PeriodOption = None,
    owner: Owner = None,
    state: State = None,
    model: Model = None,
    since: Since = None,
    until: Until = None,
    fmt: Format = OutputFormat.table,
) -> None:
    """Assistant response times in seconds, by model and/or owner.

    count, mean, min, exact p50/p90/p99 and max; --period adds a time bucket.
    """
    rows, grouping = _grouped(
        ctx,
        tenant,
        "latency",
        lambda analytics: analytics.latency,
        by,
        period,
        _filters(owner, state, model, since, until),
        groups=GROUPS,
        default=("model",),
    )
    _emit(rows, fmt, title="latency (s)", columns=(*grouping, *LATENCY_MEASURES))


# ---------------------------------------------------------------------- tools
def _percent(row: dict[str, Any]) -> dict[str, Any]:
    """A rate reads better as a percentage; a tool with no stored result has none."""
    rate = row.get("error_rate")
    return {**row, "error_rate": None if rate is None else f"{rate:.1%}"}


@stats_app.command("tools")
def tools_command(
    ctx: typer.Context,
    tenant: Tenant = None,
    by: Annotated[
        list[str] | None,
        typer.Option("--by", metavar="GROUPS", help="Also group by model (default: by tool only)."),
    ] = None,
    period: PeriodOption = None,
    owner: Owner = None,
    state: State = None,
    model: Model = None,
    since: Since = None,
    until: Until = None,
    fmt: Format = OutputFormat.table,
) -> None:
    """Tool calls, results and errors by tool, with the error rate.

    The rate is errors / results: a percentage in the table, the raw fraction
    (null when no result is stored) in json and csv, so scripts need not parse it.
    """
    rows, grouping = _grouped(ctx, tenant, "tools", lambda analytics: analytics.tools, by, period,
                              _filters(owner, state, model, since, until),
                              groups=TOOL_GROUPS, default=())  # fmt: skip
    _emit(
        rows, fmt, title="tools", columns=("tool", *grouping, *TOOL_MEASURES), table_cells=_percent
    )


# ---------------------------------------------------------------------- sessions
def _bin_label(low: int, high: int | None) -> str:
    """Bins are half-open [low, high); people read whole-number ranges like 1-9 or 1000+."""
    if high is None:
        return f"{low}+"
    return str(low) if high == low + 1 else f"{low}-{high - 1}"


def _histogram_rows(bins: Iterable[HistogramBin]) -> Rows:
    return [{"messages": _bin_label(b.low, b.high), "sessions": b.sessions} for b in bins]


def _print_sessions_table(report: SessionReport) -> None:
    if not report.sessions:
        typer.echo(NO_DATA, err=True)
    summary = [{"measure": "messages", **report.messages.model_dump()},
               {"measure": "duration (s)", **report.duration.model_dump()}]  # fmt: skip
    render(
        summary, OutputFormat.table, title=f"{report.sessions} sessions", columns=SUMMARY_COLUMNS
    )
    render(_histogram_rows(report.length_histogram), OutputFormat.table,
           title="length histogram", columns=("messages", "sessions"))  # fmt: skip


@stats_app.command("sessions")
def sessions_command(
    ctx: typer.Context,
    tenant: Tenant = None,
    owner: Owner = None,
    state: State = None,
    model: Model = None,
    since: Since = None,
    until: Until = None,
    fmt: Format = OutputFormat.table,
) -> None:
    """How long sessions are (own messages) and how long they last (seconds).

    table: a summary of both distributions and a histogram of session lengths.
    json: the whole report.
    csv: the length histogram only (one csv holds one shape), one row per bin:
    low, high, sessions, counting low <= messages < high (empty high: no bound).
    """
    filters = _filters(owner, state, model, since, until)
    report = _report(ctx, tenant, "sessions", lambda analytics: analytics.sessions(**filters))
    if fmt == OutputFormat.table:
        _print_sessions_table(report)
    elif fmt == OutputFormat.json:
        echo_json(report.model_dump(mode="json"))
    else:
        render(_dumped(report.length_histogram), fmt, columns=HISTOGRAM_CSV_COLUMNS)


# ---------------------------------------------------------------------- subtasks
def _subtask_row(row: SubtaskRow) -> dict[str, Any]:
    """The duration distribution flattened into plain columns, so csv needs no JSON blob."""
    data = row.model_dump(mode="json")
    duration = data.pop("duration")
    return {**data, **{f"duration_{name}": duration[name] for name in SUBTASK_DURATION}}


@stats_app.command("subtasks")
def subtasks_command(
    ctx: typer.Context,
    tenant: Tenant = None,
    owner: Owner = None,
    state: State = None,
    model: Model = None,
    since: Since = None,
    until: Until = None,
    fmt: Format = OutputFormat.table,
) -> None:
    """Sub-task spans per depth: finished, open, messages and duration (seconds).

    The duration distribution is flattened into duration_* columns.
    """
    filters = _filters(owner, state, model, since, until)
    rows = _report(ctx, tenant, "subtasks", lambda analytics: analytics.subtasks(**filters))
    _emit([_subtask_row(r) for r in rows], fmt, title="sub-tasks by depth", columns=SUBTASK_COLUMNS)


# ---------------------------------------------------------------------- owners
@stats_app.command("owners")
def owners_command(
    ctx: typer.Context,
    tenant: Tenant = None,
    limit: Annotated[
        int, typer.Option("--limit", min=1, max=10_000, help="How many owners (1-10000).")
    ] = 10,
    by: Annotated[
        str,
        typer.Option(
            "--by",
            metavar="MEASURE",
            help="Rank by cost, tokens_in, tokens_out, cache_reads or cache_writes.",
        ),
    ] = "cost",
    owner: Owner = None,
    state: State = None,
    model: Model = None,
    since: Since = None,
    until: Until = None,
    fmt: Format = OutputFormat.table,
) -> None:
    """The owners with the most usage, largest first, with how many tasks it came from."""
    ranking = _checked(lambda: _ranking(by))
    filters = _filters(owner, state, model, since, until)
    rows = _report(
        ctx,
        tenant,
        "owners",
        lambda analytics: analytics.top_owners(limit=limit, by=ranking, **filters),
    )
    _emit(_dumped(rows), fmt, title=f"top owners by {ranking}", columns=OWNER_COLUMNS)


# ---------------------------------------------------------------------- activity
def _roles(rows: Iterable[ActivityRow]) -> list[str]:
    """Every role seen in any period, so all rows share the same columns."""
    return sorted({role for row in rows for role in row.by_role})


def _flat_activity(row: ActivityRow, roles: Sequence[str]) -> dict[str, Any]:
    return {**row.model_dump(mode="json"), **{role: row.by_role.get(role, 0) for role in roles}}


@stats_app.command("activity")
def activity_command(
    ctx: typer.Context,
    tenant: Tenant = None,
    period: Annotated[
        str, typer.Option("--period", help="day, week (ISO) or month (UTC).")
    ] = "day",
    owner: Owner = None,
    state: State = None,
    model: Model = None,
    since: Since = None,
    until: Until = None,
    fmt: Format = OutputFormat.table,
) -> None:
    """Tasks created, messages, active owners and messages by role, per period.

    table and csv get one column per role seen; json keeps `by_role` as an object.
    """
    bucket = _checked(lambda: to_period(period))
    filters = _filters(owner, state, model, since, until)
    rows = _report(
        ctx, tenant, "activity", lambda analytics: analytics.activity(period=bucket, **filters)
    )
    if fmt == OutputFormat.json:
        _emit(_dumped(rows), fmt, title="activity", columns=(*ACTIVITY_COLUMNS, "by_role"))
        return
    roles = _roles(rows)
    _emit([_flat_activity(r, roles) for r in rows], fmt, title=f"activity per {period}",
          columns=(*ACTIVITY_COLUMNS, *roles))  # fmt: skip
