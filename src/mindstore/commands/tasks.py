"""`mindstore tasks list | show | messages | tree`: read a tenant's tasks from the shell.

Every command here is read-only, so the store is opened with `save=False`: inspecting a
`--data` snapshot never rewrites it. Output goes through `--format` (table for people,
json and csv for scripts); anything that is not data (the next page's cursor) goes to
stderr so stdout stays machine-readable.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.table import Table

from mindstore.commands.arguments import MAX_COUNT
from mindstore.commands.common import note_unknown_tenant, open_store, require_tenant, run
from mindstore.commands.output import OutputFormat, console, echo_json, echo_text, render
from mindstore.commands.sanitize import plain
from mindstore.errors import ValidationError
from mindstore.model.header import TaskState

if TYPE_CHECKING:
    from mindstore.model.levels import SubTaskSpan
    from mindstore.model.messages import AnyMessage
    from mindstore.protocols import TaskRecord
    from mindstore.store import TenantStore


T = TypeVar("T")

PREVIEW_WIDTH = 80

TASK_COLUMNS = ("id", "owner", "title", "state", "messages", "level", "tokens_in", "tokens_out",
                "cost", "updated_at")  # fmt: skip
SPAN_COLUMNS = ("entry_id", "entry_index", "exit_index", "depth", "parent_scope", "message_count",
                "started_ts", "finished_ts", "duration")  # fmt: skip
MESSAGE_COLUMNS = ("index", "id", "role", "scope", "depth", "started_ts", "finished_ts", "model_id",
                   "tokens_in", "tokens_out", "text")  # fmt: skip
TREE_COLUMNS = ("id", "parent_id", "depth", "messages")

Tenant = Annotated[
    str | None,
    typer.Option(
        "--tenant", envvar="MINDSTORE_TENANT", help="Tenant to read (default: MINDSTORE_TENANT)."
    ),
]
Format = Annotated[OutputFormat, typer.Option("--format", "-f", help="table, json or csv.")]
TaskId = Annotated[str, typer.Argument(metavar="TASK_ID", help="The task (dialog) id.")]

tasks_app = typer.Typer(
    help="Inspect a tenant's tasks: list them, show one, read its messages, see its fork tree.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.add_typer(tasks_app, name="tasks")


def _read(
    ctx: typer.Context, tenant: str | None, query: Callable[[TenantStore], Awaitable[T]]
) -> T:
    """Run one read against the tenant's scope; the tenant is checked inside `run` so a
    missing one gets the same one-line error and exit code as any other failure."""

    async def body() -> T:
        name = require_tenant(tenant)
        async with open_store(ctx, save=False) as store:
            scope = store.scoped(name)  # checks the tenant id first
            await note_unknown_tenant(store, name)
            return await query(scope)

    return run(body())


# ---------------------------------------------------------------------- rows
def _task_row(record: TaskRecord) -> dict[str, Any]:
    """The columns that tell tasks apart at a glance; `show` has the rest."""
    return {
        "id": record.id, "owner": record.owner, "title": record.title, "state": record.state,
        "messages": record.seq, "level": record.level, "tokens_in": record.usage.tokens_in,
        "tokens_out": record.usage.tokens_out, "cost": record.usage.cost,
        "updated_at": record.updated_at.isoformat(),
    }  # fmt: skip


def _record_dict(record: TaskRecord) -> dict[str, Any]:
    """The whole record with usage flattened, so csv gets plain columns, not a JSON blob."""
    data = record.model_dump(mode="json")
    return {**{k: v for k, v in data.items() if k != "usage"}, **data["usage"]}


def _span_dict(span: SubTaskSpan) -> dict[str, Any]:
    return {**asdict(span), "duration": span.duration}


def _preview(text: str, width: int = PREVIEW_WIDTH) -> str:
    """One line per message in a table: whitespace collapsed, long text cut with an ellipsis."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def _message_row(index: int, message: Any) -> dict[str, Any]:
    assistant = getattr(message, "role", None) == "assistant"
    return {
        "index": index, "id": message.id, "role": getattr(message, "role", None),
        "scope": message.scope, "depth": message.depth, "started_ts": message.started_ts,
        "finished_ts": message.finished_ts,
        "model_id": message.model_id if assistant else None,
        "tokens_in": message.tokens_in if assistant else None,
        "tokens_out": message.tokens_out if assistant else None,
        "text": _preview(message.text()),
    }  # fmt: skip


def _tree_rows(node: dict[str, Any], parent_id: str | None = None) -> Iterator[dict[str, Any]]:
    """The nested `tree_json` as flat rows, parents before children, for csv."""
    if not node:
        return
    yield {"id": node["dialog_id"], "parent_id": parent_id, "depth": node["depth"],
           "messages": node["messages"]}  # fmt: skip
    for child in node.get("children", []):
        yield from _tree_rows(child, node["dialog_id"])


# ---------------------------------------------------------------------- list
@tasks_app.command("list")
def list_command(
    ctx: typer.Context,
    tenant: Tenant = None,
    owner: Annotated[str | None, typer.Option("--owner", help="Only this owner's tasks.")] = None,
    state: Annotated[
        TaskState | None, typer.Option("--state", help="Only tasks in this state.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=1000, help="Page size.")] = 50,
    cursor: Annotated[
        str | None, typer.Option("--cursor", help="Continue after a previous page.")
    ] = None,
    fmt: Format = OutputFormat.table,
) -> None:
    """One page of tasks, newest first; the next page's --cursor is printed on stderr."""
    page = _read(
        ctx,
        tenant,
        lambda scope: scope.tasks.list(owner=owner, state=state, limit=limit, cursor=cursor),
    )
    render([_task_row(r) for r in page.items], fmt, title="tasks", columns=TASK_COLUMNS)
    if page.next_cursor:
        typer.echo(f"next page: --cursor {page.next_cursor}", err=True)


# ---------------------------------------------------------------------- show
async def _record_and_spans(
    scope: TenantStore, task_id: str
) -> tuple[TaskRecord, list[SubTaskSpan]]:
    return await scope.tasks.get(task_id), await scope.tasks.sub_task_spans(task_id)


def _print_record_table(record: dict[str, Any], spans: list[dict[str, Any]]) -> None:
    """A vertical field/value table: one record is too wide to read as a single row."""
    table = Table(title=plain(f"task {record['id']}"), title_justify="left")
    table.add_column("field")
    table.add_column("value")
    for name, value in record.items():
        table.add_row(plain(name), plain(value))
    console(width=200).print(table)
    render(spans, OutputFormat.table, title="sub-tasks", columns=SPAN_COLUMNS)


@tasks_app.command("show")
def show_command(ctx: typer.Context, task_id: TaskId, tenant: Tenant = None,
                 fmt: Format = OutputFormat.table) -> None:  # fmt: skip
    """One task's header (usage flattened) and its sub-task spans."""
    record, spans = _read(ctx, tenant, lambda scope: _record_and_spans(scope, task_id))
    data, span_rows = _record_dict(record), [_span_dict(s) for s in spans]
    if fmt == OutputFormat.json:
        echo_json({**data, "sub_tasks": span_rows})
    elif fmt == OutputFormat.csv:
        render([{**data, "sub_tasks": span_rows}], fmt, columns=[*data, "sub_tasks"])
    else:
        _print_record_table(data, span_rows)


# ---------------------------------------------------------------------- messages
def _check_window(start: int | None, limit: int | None, tail: int | None) -> None:
    """--tail picks its own window; combining it with another one has no single meaning."""
    if tail is not None and (start is not None or limit is not None):
        raise ValidationError("--tail cannot be combined with --start or --limit; use one window")


async def _message_window(
    scope: TenantStore, task_id: str, start: int | None, limit: int | None, tail: int | None
) -> tuple[int, list[AnyMessage]]:
    """(index of the first message, messages). The tail and its position come from one
    snapshot (`ends`), so indexes stay right while the task is being appended to."""
    if tail is None:
        first = start or 0
        return first, await scope.tasks.messages(task_id, start=first, limit=limit)
    count, _, last = await scope.tasks.ends(task_id, 0, tail)
    return count - len(last), last


@tasks_app.command("messages")
def messages_command(
    ctx: typer.Context,
    task_id: TaskId,
    tenant: Tenant = None,
    start: Annotated[
        int | None, typer.Option("--start", min=0, max=MAX_COUNT, help="First message index.")
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, max=MAX_COUNT, help="At most this many.")
    ] = None,
    tail: Annotated[
        int | None,
        typer.Option("--tail", min=1, max=MAX_COUNT, help="Only the last N messages."),
    ] = None,
    fmt: Format = OutputFormat.table,
) -> None:
    """A task's messages: previews in table/csv, the full stored messages in json."""

    async def query(scope: TenantStore) -> tuple[int, list[AnyMessage]]:
        _check_window(start, limit, tail)
        return await _message_window(scope, task_id, start, limit, tail)

    first, messages = _read(ctx, tenant, query)
    if fmt == OutputFormat.json:
        echo_json([m.model_dump(mode="json") for m in messages])
        return
    rows = [_message_row(first + i, m) for i, m in enumerate(messages)]
    render(rows, fmt, title=f"messages of {task_id}", columns=MESSAGE_COLUMNS)


# ---------------------------------------------------------------------- tree
async def _tree(scope: TenantStore, task_id: str, from_root: bool, fmt: OutputFormat) -> Any:
    dialogs = scope.dialogs
    top = await dialogs.root(task_id) if from_root else task_id
    if fmt == OutputFormat.table:
        return await dialogs.tree_overview(top)
    return await dialogs.tree_json(top)


@tasks_app.command("tree")
def tree_command(
    ctx: typer.Context,
    task_id: TaskId,
    tenant: Tenant = None,
    from_root: Annotated[
        bool,
        typer.Option(
            "--from-root", help="Show the whole tree the task belongs to, not just its subtree."
        ),
    ] = False,
    fmt: Format = OutputFormat.table,
) -> None:
    """The dialog fork tree under a task: who forked from whom, how many messages each."""
    tree = _read(ctx, tenant, lambda scope: _tree(scope, task_id, from_root, fmt))
    if fmt == OutputFormat.table:
        echo_text(tree)
    elif fmt == OutputFormat.json:
        echo_json(tree)
    else:
        render(list(_tree_rows(tree)), fmt, columns=TREE_COLUMNS)
