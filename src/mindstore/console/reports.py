"""Analytics rows -> the console's charts (pure): what each chart shows, and its table.

`CHARTS` names every chart the console draws; `build` turns the rows of one report into
its `Chart`. The tables carry the same numbers the charts draw (and the CSV is the table),
so a person can check a bar against its value.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime
from typing import Final

from mindstore.analytics.rows import ActiveOwnersRow, LatencyRow, ToolRow, UsageRow
from mindstore.console.charts import Cell, Chart, Series

CHARTS: Final = {
    "tokens": "Tokens per model over time",
    "cost": "Cost per model over time (USD)",
    "latency": "Response time percentiles per model (seconds)",
    "tools": "Tool calls and errors per tool",
    "owners": "Active owners over time",
}


def _name(value: str | None) -> str:
    return value if value is not None else "(none)"


def _over_time(rows: Sequence[UsageRow], measure: str, key: str) -> Chart:
    periods = sorted({_name(r.period) for r in rows})
    models = sorted({_name(r.model) for r in rows})
    value: dict[tuple[str, str], float] = {}
    for r in rows:
        amount = float(r.tokens_in + r.tokens_out) if measure == "tokens" else float(r.cost)
        cell = (_name(r.period), _name(r.model))
        value[cell] = value.get(cell, 0.0) + amount
    series = [Series(m, [value.get((p, m), 0.0) for p in periods]) for m in models]
    if measure == "tokens":
        columns: tuple[str, ...] = ("period", "model", "tokens_in", "tokens_out", "messages")
        table: list[tuple[Cell, ...]] = [
            (_name(r.period), _name(r.model), r.tokens_in, r.tokens_out, r.messages) for r in rows
        ]
    else:
        columns = ("period", "model", "cost", "messages")
        table = [(_name(r.period), _name(r.model), round(r.cost, 6), r.messages) for r in rows]
    table.sort(key=lambda row: (str(row[0]), str(row[1])))
    starts = [period_start(p) for p in periods]
    times = None if None in starts else [t for t in starts if t is not None]
    return Chart(key, CHARTS[key], "line", periods, series, columns, table, times=times)


def period_start(label: str) -> float | None:
    """The UTC start (epoch seconds) of a period label: `2026-10-05`, `2026-W41` (its
    Monday) or `2026-10`; None for anything else."""
    try:
        if len(label) == 10:
            day = date.fromisoformat(label)
        elif "-W" in label:
            year, week = label.split("-W")
            day = date.fromisocalendar(int(year), int(week), 1)
        else:
            year, month = label.split("-")
            day = date(int(year), int(month), 1)
    except ValueError:
        return None
    return datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()


def tokens(rows: Sequence[UsageRow]) -> Chart:
    """Tokens in + out per model and period (rows grouped by period and model)."""
    return _over_time(rows, "tokens", "tokens")


def cost(rows: Sequence[UsageRow]) -> Chart:
    """Cost per model and period."""
    return _over_time(rows, "cost", "cost")


def latency(rows: Sequence[LatencyRow]) -> Chart:
    """p50, p90 and p99 of assistant response time per model."""
    ordered = sorted(rows, key=lambda r: _name(r.model))
    labels = [_name(r.model) for r in ordered]
    series = [
        Series(p, [float(getattr(r, p) or 0.0) for r in ordered]) for p in ("p50", "p90", "p99")
    ]
    columns = ("model", "count", "mean", "p50", "p90", "p99", "max")
    table: list[tuple[Cell, ...]] = [
        (_name(r.model), r.count, r.mean, r.p50, r.p90, r.p99, r.max) for r in ordered
    ]
    return Chart("latency", CHARTS["latency"], "bar", labels, series, columns, table, "s")


def tools(rows: Sequence[ToolRow]) -> Chart:
    """Calls and errors per tool, with the error rate in the table."""
    ordered = sorted(rows, key=lambda r: (-r.calls, _name(r.tool)))
    labels = [_name(r.tool) for r in ordered]
    series = [
        Series("calls", [float(r.calls) for r in ordered]),
        Series("errors", [float(r.errors) for r in ordered]),
    ]
    columns = ("tool", "calls", "results", "errors", "error_rate")
    table: list[tuple[Cell, ...]] = [
        (
            _name(r.tool),
            r.calls,
            r.results,
            r.errors,
            None if r.error_rate is None else round(r.error_rate, 4),
        )
        for r in ordered
    ]
    return Chart("tools", CHARTS["tools"], "bar", labels, series, columns, table)


def owners(rows: Sequence[ActiveOwnersRow]) -> Chart:
    """How many owners wrote at least one message, per period."""
    ordered = sorted(rows, key=lambda r: _name(r.period))
    labels = [_name(r.period) for r in ordered]
    series = [Series("active owners", [float(r.active_owners) for r in ordered])]
    table: list[tuple[Cell, ...]] = [(_name(r.period), r.active_owners) for r in ordered]
    return Chart(
        "owners", CHARTS["owners"], "bar", labels, series, ("period", "active_owners"), table
    )
