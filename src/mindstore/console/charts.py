"""Charts as data and as SVG geometry (pure): no script, no file from elsewhere.

A `Chart` is what a report says (labels along x, named series of numbers, the table of the
same numbers); `draw` turns it into the coordinates the template writes as SVG elements
(polylines for time series, grouped bars for categories). Labels are text nodes the template
escapes; colours are CSS classes, so the page needs no inline style.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from mindstore.inert_text import csv_text

WIDTH: Final = 720
HEIGHT: Final = 260
LEFT: Final = 64
RIGHT: Final = 12
TOP: Final = 12
BOTTOM: Final = 44
MAX_X_LABELS: Final = 12
SERIES_CLASSES: Final = 8
"""Series colours: `s0` to `s7` in the stylesheet, reused past eight series."""

Cell = str | int | float | None


@dataclass(frozen=True)
class Series:
    name: str
    values: list[float]


@dataclass(frozen=True)
class Chart:
    """One chart: `labels` along x, `series` over them, and the table behind it."""

    key: str
    title: str
    kind: Literal["line", "bar"]
    labels: list[str]
    series: list[Series]
    columns: tuple[str, ...]
    table: list[tuple[Cell, ...]]
    unit: str = ""
    times: list[float] | None = None
    """For a chart over time: each label's start (epoch seconds), so a line chart places
    its points by time (a missing week takes its room) rather than evenly."""

    def csv(self) -> str:
        """The table as CSV (the numbers behind the chart), by the CLI's writer: no cell
        can start a formula or split its row (`mindstore.inert_text.csv_text`)."""
        return csv_text(self.columns, self.table)


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    css: str
    title: str


@dataclass(frozen=True)
class Line:
    points: str
    css: str
    name: str


@dataclass(frozen=True)
class Dot:
    """A line chart's value at its only period: a line needs two points to show."""

    x: float
    y: float
    css: str
    title: str


@dataclass(frozen=True)
class Tick:
    at: float
    text: str


@dataclass(frozen=True)
class Drawing:
    """What the template draws: a frame of `width` x `height`, lines or bars, axis ticks."""

    width: int
    height: int
    lines: list[Line] = field(default_factory=list)
    bars: list[Bar] = field(default_factory=list)
    dots: list[Dot] = field(default_factory=list)
    y_ticks: list[Tick] = field(default_factory=list)
    x_ticks: list[Tick] = field(default_factory=list)
    legend: list[tuple[str, str]] = field(default_factory=list)
    empty: bool = False


def nice_max(value: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten at or above `value` (1 for nothing)."""
    if not math.isfinite(value) or value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if step * power >= value:
            return float(step * power)
    return float(10 * power)  # pragma: no cover - the loop always returns


def fmt(value: float) -> str:
    """A number for an axis: short, without float noise."""
    if value == 0:
        return "0"
    if abs(value) >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if abs(value) >= 1_000:
        return f"{value / 1_000:g}k"
    return f"{value:.4g}"


def _finite(values: Sequence[float]) -> list[float]:
    return [v if isinstance(v, (int, float)) and math.isfinite(v) else 0.0 for v in values]


def draw(chart: Chart) -> Drawing:
    """The geometry of `chart`: every value scaled into the frame, never outside it."""
    series = [Series(s.name, _finite(s.values)) for s in chart.series]
    count = len(chart.labels)
    legend = [(s.name, f"s{i % SERIES_CLASSES}") for i, s in enumerate(series)]
    if count == 0 or not series:
        return Drawing(WIDTH, HEIGHT, legend=legend, empty=True)
    top = nice_max(max((max(s.values, default=0.0) for s in series), default=0.0))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def y_of(value: float) -> float:
        return round(TOP + plot_h - max(0.0, min(value, top)) / top * plot_h, 2)

    y_ticks = [Tick(y_of(top * i / 4), fmt(top * i / 4)) for i in range(5)]
    step = plot_w / count
    xs = [round(LEFT + step * (i + 0.5), 2) for i in range(count)]
    times = chart.times
    if chart.kind == "line" and times is not None and len(times) == count and count > 1:
        span = max(times) - min(times)
        if span > 0 and all(math.isfinite(t) for t in times):  # a time axis
            pad = min(step / 2, 24.0)
            xs = [round(LEFT + pad + (t - min(times)) / span * (plot_w - 2 * pad), 2)
                  for t in times]  # fmt: skip
    x_ticks: list[Tick] = []
    for x, label in zip(xs, chart.labels, strict=True):
        if not x_ticks or x - x_ticks[-1].at >= plot_w / MAX_X_LABELS:
            x_ticks.append(Tick(x, label))
    drawing = Drawing(WIDTH, HEIGHT, y_ticks=y_ticks, x_ticks=x_ticks, legend=legend)
    if chart.kind == "line":
        for i, s in enumerate(series):
            points = " ".join(f"{xs[j]},{y_of(v)}" for j, v in enumerate(s.values[:count]))
            drawing.lines.append(Line(points, f"s{i % SERIES_CLASSES}", s.name))
            if count == 1:
                value = s.values[0] if s.values else 0.0
                drawing.dots.append(Dot(xs[0], y_of(value), f"s{i % SERIES_CLASSES}",
                                        f"{s.name} · {chart.labels[0]}: {fmt(value)}"))  # fmt: skip
        return drawing
    width = step * 0.8 / len(series)
    for i, s in enumerate(series):
        for j, v in enumerate(s.values[:count]):
            y = y_of(v)
            drawing.bars.append(
                Bar(
                    x=round(LEFT + step * j + step * 0.1 + width * i, 2),
                    y=y,
                    width=round(width, 2),
                    height=round(TOP + plot_h - y, 2),
                    css=f"s{i % SERIES_CLASSES}",
                    title=f"{s.name} · {chart.labels[j]}: {fmt(v)}",
                )
            )
    return drawing
