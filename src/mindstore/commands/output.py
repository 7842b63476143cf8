"""Render rows as a rich table, JSON or CSV (`--format`); progress bars for long commands.

Every value is user data to be shown, never interpreted: table cells and titles go
through `sanitize.plain` (no rich markup, no terminal escapes), CSV through
`sanitize.csv_text`, the writer the console shares (no spreadsheet formulas), and JSON
is always valid UTF-8.
"""

from __future__ import annotations

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

from mindstore.commands.sanitize import csv_text, json_text, plain, terminal_text


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


def console(*, stderr: bool = False, width: int | None = None) -> Console:
    """A console that prints strings as they are: no markup, no highlighting, no emoji
    codes (pass user data through `sanitize` first)."""
    return Console(
        stderr=stderr,
        width=width,
        markup=False,
        highlight=False,
        emoji=False,
        soft_wrap=width is None,
    )


def echo_json(data: Any) -> None:
    """Print data as indented JSON: non-ASCII kept readable, anything else as its str.

    JSON escapes C0 control characters itself; the few others a terminal would act on,
    and lone surrogates (which UTF-8 cannot hold), are written as ``\\uXXXX`` escapes
    (`sanitize.json_text`): the same JSON value."""
    typer.echo(json_text(json.dumps(data, indent=2, ensure_ascii=False, default=str)))


def echo_text(text: str) -> None:
    """Print text that may hold user data (escaped, see `sanitize.terminal_text`)."""
    typer.echo(terminal_text(text))


def render(
    items: Iterable[Any],
    fmt: OutputFormat,
    *,
    title: str | None = None,
    columns: Sequence[str] | None = None,
) -> None:
    rows = rows_of(items)
    if fmt == OutputFormat.json:
        echo_json(rows)
        return
    names = list(columns) if columns else (list(rows[0]) if rows else [])
    if fmt == OutputFormat.csv:
        cells = (
            [json.dumps(v, default=str) if isinstance(v, (dict, list)) else v for v in
             (row.get(name) for name in names)]
            for row in rows
        )  # fmt: skip
        typer.echo(csv_text(names, cells), nl=False)
        return
    table = Table(title=plain(title) if title else None)
    for name in names:
        table.add_column(plain(name))
    for row in rows:
        table.add_row(*(plain(row.get(n)) for n in names))
    console(width=200).print(table)


@contextmanager
def progress_bar() -> Iterator[Any]:
    """A rich progress bar on stderr when it is a terminal; otherwise no callback."""
    err = console(stderr=True)
    if not err.is_terminal:
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
        console=err,
        transient=True,
    ) as bar:
        steps: dict[str, Any] = {}

        def update(step: str, done: int, total: int | None) -> None:
            if step not in steps:
                steps[step] = bar.add_task(step, total=total)
            bar.update(steps[step], completed=done, total=total)

        yield update
