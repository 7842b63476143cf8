"""`mindstore search "..."` and `mindstore search-index rebuild | verify` (docs/search.md).

A thin shell over `store.scoped(tenant).search` and `.search_index`: the query language,
its checks and the index live in `mindstore.search`; this module turns options into
arguments and hits into `--format` output. A search brings the index up to date, so it
writes: with `--data`, the snapshot is saved afterwards.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from mindstore.commands.arguments import time_bound
from mindstore.commands.common import note_unknown_tenant, open_store, require_tenant, run
from mindstore.commands.output import OutputFormat, echo_json, render
from mindstore.search.modes import Match, Mode

COLUMNS = ("score", "task_id", "message_id", "role", "owner", "time", "snippet")

Tenant = Annotated[
    str | None,
    typer.Option(
        "--tenant", envvar="MINDSTORE_TENANT", help="Tenant to search (default: MINDSTORE_TENANT)."
    ),
]
Format = Annotated[OutputFormat, typer.Option("--format", "-f", help="table, json or csv.")]

index_app = typer.Typer(
    help="Operate a tenant's search index: rebuild it, or verify it against the tasks.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.command("search")(search)
    app.add_typer(index_app, name="search-index")


def search(
    ctx: typer.Context,
    query: Annotated[
        str, typer.Argument(help='What to find: words, "a phrase", -word, role:user, tool:<name>.')
    ],
    tenant: Tenant = None,
    owner: Annotated[
        str | None, typer.Option("--owner", help="Only this owner's messages.")
    ] = None,
    role: Annotated[
        list[str] | None, typer.Option("--role", help="Only this role (repeat).")
    ] = None,
    since: Annotated[str | None, typer.Option("--since", help="From this time (ISO 8601).")] = None,
    until: Annotated[
        str | None, typer.Option("--until", help="Before this time (ISO 8601).")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", help="Hits to show, 1 to 100.")] = 20,
    cursor: Annotated[str | None, typer.Option("--cursor", help="The next page's cursor.")] = None,
    mode: Annotated[
        Mode | None,
        typer.Option(
            "--mode",
            help="lexical, semantic or hybrid (default: hybrid with an embedder, else lexical).",
        ),
    ] = None,
    match: Annotated[
        Match,
        typer.Option(
            "--match", help="any: a message holding any word (stop words aside); all: every word."
        ),
    ] = "any",
    fmt: Format = OutputFormat.table,
) -> None:
    """Search a tenant's conversations: hits ranked by relevance, with snippets."""

    async def body() -> tuple[list[dict[str, Any]], str | None]:
        name = require_tenant(tenant)
        start, end = time_bound(since, "--since"), time_bound(until, "--until")
        async with open_store(ctx) as store:
            view = store.scoped(name)
            await note_unknown_tenant(store, name)
            page = await view.search(
                query, owner=owner, roles=role, since=start, until=end, limit=limit,
                cursor=cursor, mode=mode, match=match,
            )  # fmt: skip
        rows = [
            {
                "score": round(hit.score, 4),
                "task_id": hit.task_id,
                "message_id": hit.message_id,
                "role": hit.role,
                "owner": hit.owner,
                "time": hit.time.isoformat(),
                "snippet": hit.snippet.marked() if fmt == OutputFormat.table else hit.snippet.text,
            }
            for hit in page.hits
        ]
        return rows, page.next_cursor

    rows, next_cursor = run(body())
    if fmt == OutputFormat.json:
        echo_json({"hits": rows, "next_cursor": next_cursor})
        return
    render(rows, fmt, title=f"search: {query}", columns=COLUMNS)
    if next_cursor and fmt == OutputFormat.table:
        typer.echo(f"next page: --cursor {next_cursor}", err=True)


@index_app.command("rebuild")
def rebuild(
    ctx: typer.Context,
    tenant: Tenant = None,
    stemming: Annotated[
        str | None, typer.Option("--stemming", help="english, or leave out for none.")
    ] = None,
) -> None:
    """Drop the tenant's search index and index every task again."""

    async def body() -> int:
        name = require_tenant(tenant)
        async with open_store(ctx) as store:
            return await store.scoped(name).search_index.rebuild(stemming=stemming)

    typer.echo(f"indexed {run(body())} messages")


@index_app.command("create-vector-index")
def create_vector_index(
    ctx: typer.Context,
    dimensions: Annotated[
        int | None,
        typer.Option("--dimensions", help="The vectors' size (default: the --embedder's)."),
    ] = None,
) -> None:
    """Ask the server to build the vector index for recall by meaning (MongoDB 8.2+ with its
    search process, or Atlas); `mindstore doctor` says when it serves."""

    async def body() -> None:
        async with open_store(ctx, save=False) as store:
            await store.create_vector_index(dimensions)

    run(body())
    typer.echo("vector index requested: the server builds it in the background", err=True)


@index_app.command("verify")
def verify(ctx: typer.Context, tenant: Tenant = None, fmt: Format = OutputFormat.table) -> None:
    """Compare the tenant's search index with its tasks; exit 1 when they differ."""

    async def body() -> dict[str, Any]:
        name = require_tenant(tenant)
        async with open_store(ctx, save=False) as store:
            report = await store.scoped(name).search_index.verify()
        return {
            "ok": report.ok,
            "tasks": report.tasks,
            "entries": report.entries,
            "missing": len(report.missing),
            "extra": len(report.extra),
            "postings_ok": report.postings_ok,
            "statistics_ok": report.statistics_ok,
        }

    result = run(body())
    if fmt == OutputFormat.json:
        echo_json(result)
    else:
        render([result], fmt, title="search index")
    if not result["ok"]:
        raise typer.Exit(1)
