"""Render rows as a rich table, JSON or CSV (`--format`); progress bars for long commands."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from enum import Enum
from typing import Any

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.table import Table


class OutputFormat(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Enum):
        return value.value
    return value


def rows_of(items: Iterable[Any]) -> list[dict[str, Any]]:
    rows = []
    for item in items:
        data = _plain(item)
        rows.append(data if isinstance(data, dict) else {"value": data})
    return rows


def echo_json(data: Any) -> None:
    """Print data as indented JSON: non-ASCII kept readable, anything else as its str."""
    typer.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def render(items: Iterable[Any], fmt: OutputFormat, *, title: str | None = None,
           columns: Sequence[str] | None = None) -> None:
    rows = rows_of(items)
    if fmt == OutputFormat.json:
        echo_json(rows)
        return
    names = list(columns) if columns else (list(rows[0]) if rows else [])
    if fmt == OutputFormat.csv:
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=names, extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: (json.dumps(v, default=str) if isinstance(v, (dict, list)) else v)
                             for k, v in row.items()})
        typer.echo(buffer.getvalue(), nl=False)
        return
    table = Table(title=title)
    for name in names:
        table.add_column(name)
    for row in rows:
        table.add_row(*("" if row.get(n) is None else str(row.get(n)) for n in names))
    Console(width=200).print(table)


@contextmanager
def progress_bar() -> Iterator[Any]:
    """A rich progress bar on stderr when it is a terminal; otherwise no callback."""
    console = Console(stderr=True)
    if not console.is_terminal:
        yield None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description:<24}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        steps: dict[str, Any] = {}

        def update(step: str, done: int, total: int | None) -> None:
            if step not in steps:
                steps[step] = bar.add_task(step, total=total)
            bar.update(steps[step], completed=done, total=total)

        yield update
