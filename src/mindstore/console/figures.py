"""The console's charts page and its CSV: a tenant's figures kept by UTC day
(`DayFigures`), refreshed incrementally, computed the first time in the background (one
tenant at a time), then cut to the request's period, days, model and owner.
docs/console.md ("Charts and figures on a large tenant").
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Final
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from mindstore.analytics.incremental import DayFigures, day_aligned
from mindstore.console import reports
from mindstore.console.charts import Chart, draw
from mindstore.console.handling import (
    Console,
    console_of,
    query_param,
    signed_in,
    tenant_view,
    time_bounds,
)
from mindstore.console.readonly import ReadOnlyTenant
from mindstore.console.rendering import page
from mindstore.errors import NotFound, ValidationError

CHARTS_WAIT: Final = 0.3
"""Seconds the charts page waits for a tenant's first figures before it answers that they
are being computed (and reloads itself until they are)."""
PERIODS: Final = ("day", "week", "month")
CHART_FILTERS: Final = ("period", "since", "until", "model", "owner")
"""The charts' query; tools are not filtered by owner, active owners not by model."""


class FiguresPending(Exception):
    """A tenant's charts are being computed for the first time (`done` of `total` tasks)."""

    def __init__(self, done: int, total: int) -> None:
        super().__init__(f"figures: {done} of {total} tasks")
        self.done, self.total = done, total


def _figures(console: Console, view: ReadOnlyTenant) -> DayFigures:
    figures = console.figures.get(view.tenant)
    if figures is None:
        figures = console.figures[view.tenant] = view.day_figures()
    return figures


def warm(console: Console, view: ReadOnlyTenant) -> DayFigures:
    """The tenant's figures, with a background refresh started unless one is under way
    (refreshes of all tenants take turns: `Console.heavy`)."""
    figures = _figures(console, view)
    running = console.warming.get(view.tenant)
    if running is None or running.done():

        async def refresh() -> None:
            async with console.heavy:
                await figures.refresh()

        console.warming[view.tenant] = asyncio.get_running_loop().create_task(refresh())
    return figures


async def _charts(
    view: ReadOnlyTenant,
    request: Request,
    keys: Iterable[str] = tuple(reports.CHARTS),
    wait: float | None = None,
) -> list[Chart]:
    """The charts named by `keys`, over the request's period and UTC days, from the
    tenant's kept figures (`DayFigures`: brought up to date first, incrementally). The
    first time, they are computed in the background: `FiguresPending` when that takes
    longer than `wait` seconds (None: as long as it takes)."""
    period = query_param(request, "period") or "day"
    if period not in PERIODS:
        raise ValidationError(f"period: expected one of {', '.join(PERIODS)}")
    since, until = time_bounds(request)
    for name, bound in (("since", since), ("until", until)):
        if not day_aligned(bound):
            raise ValidationError(f"{name}: charts take a UTC day (2026-10-01)")
    console = console_of(request)
    figures = warm(console, view)
    if not figures.refreshed:
        warming = console.warming[view.tenant]
        await asyncio.wait({warming}, timeout=wait)
        failed = warming.exception() if warming.done() and not warming.cancelled() else None
        if failed is not None:  # the store's own error: its page (the next read retries)
            raise failed
    if not figures.refreshed:
        raise FiguresPending(figures.done, figures.total)
    await figures.refresh()  # what changed since the last read: little, usually
    model, owner = query_param(request, "model"), query_param(request, "owner")
    wanted = list(keys)
    found: list[Chart] = []
    if "tokens" in wanted or "cost" in wanted:
        usage = figures.usage(period, since, until, model=model, owner=owner)
        found += [reports.tokens(usage)] if "tokens" in wanted else []
        found += [reports.cost(usage)] if "cost" in wanted else []
    if "latency" in wanted:
        found.append(reports.latency(figures.latency(since, until, model=model, owner=owner)))
    if "tools" in wanted:  # a tool call has no owner of its own
        found.append(reports.tools(figures.tools(since, until, model=model)))
    if "owners" in wanted:  # owners are not counted per model
        found.append(reports.owners(figures.active_owners(period, since, until, owner=owner)))
    return found


@signed_in
async def charts(request: Request) -> Response:
    """Tokens and cost per model over time, latency percentiles, tools, active owners."""
    view = tenant_view(request)
    progress: tuple[int, int] | None = None
    try:
        found = await _charts(view, request, wait=console_of(request).charts_wait)
    except FiguresPending as pending:
        found, progress = [], (pending.done, pending.total)
    drawn = [(chart, draw(chart)) for chart in found]
    query = urlencode({k: v for k in CHART_FILTERS if (v := query_param(request, k))})
    return page(
        request,
        "charts.html",
        tenant=view.tenant,
        charts=drawn,
        progress=progress,
        query=query,
        period=query_param(request, "period") or "day",
        since=query_param(request, "since") or "",
        until=query_param(request, "until") or "",
        model=query_param(request, "model") or "",
        owner=query_param(request, "owner") or "",
    )


@signed_in
async def chart_csv(request: Request) -> Response:
    """One chart's numbers as CSV."""
    view = tenant_view(request)
    key = request.path_params["chart"]
    if key not in reports.CHARTS:
        raise NotFound("chart")
    try:
        (chart,) = await _charts(view, request, [key])
    except FiguresPending as pending:
        return PlainTextResponse(f"the charts are being computed ({pending}): try again",
                                 status_code=503, headers={"Retry-After": "2"})  # fmt: skip
    return Response(
        chart.csv(),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{view.tenant}-{key}.csv"'},
    )
