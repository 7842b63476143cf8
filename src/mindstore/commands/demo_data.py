"""`mindstore demo-data`: fill a store with a realistic generated workload.

So that every report and command can be tried before real traffic exists: several
tenants and owners, four models, nested sub-tasks (some still open), tool errors,
missing usage and forks (`mindstore.workload`). With `--data FILE` the embedded store is
saved to FILE, and later commands given the same `--data` read it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from mindstore.collection_names import TASKS
from mindstore.commands.common import open_store, run, settings
from mindstore.commands.output import console, progress_bar
from mindstore.commands.sanitize import terminal_text
from mindstore.errors import ConfigurationError, Conflict
from mindstore.workload import Workload, WorkloadSpec, generate, load

if TYPE_CHECKING:
    from mindstore.store import Store


def _spec(
    tenants: int, owners: int, tasks: int, messages: int, days: int, seed: int
) -> WorkloadSpec:
    return WorkloadSpec(tenants=tenants, owners_per_tenant=owners, tasks=tasks,
                        mean_messages=messages, days=days, seed=seed)  # fmt: skip


async def _refuse_duplicates(store: Store, workload: Workload, seed: int) -> None:
    """The workload is deterministic: loading the same seed twice would collide on ids."""
    ids = [task["_id"] for task in workload.tasks]
    for tenant in sorted({task["tenant"] for task in workload.tasks}):
        if await store.database[TASKS].count_documents(
            {"tenant": tenant, "_id": {"$in": ids}}, limit=1
        ):
            raise Conflict(
                f"demo data of seed {seed} is already in this store (tenant {tenant}); "
                f"pass another --seed, or erase it first (mindstore erase --tenant {tenant})"
            )


def _summary(workload: Workload, data: Any) -> None:
    tenants = sorted({task["tenant"] for task in workload.tasks})
    forks = sum(1 for node in workload.nodes if node.get("parent_id"))
    out = console()
    out.print(f"loaded {len(workload.tasks)} tasks ({forks} forks) with "
              f"{workload.message_count} messages for tenants {', '.join(tenants)}")  # fmt: skip
    where = f"--data {terminal_text(data)} " if data else ""
    out.print(f"try: mindstore {where}stats usage --tenant {tenants[0]} --by model --period week")


def register(app: typer.Typer) -> None:
    """Add this module's command to the root app."""

    @app.command("demo-data")
    def demo_data_command(
        ctx: typer.Context,
        tenants: Annotated[
            int, typer.Option("--tenants", min=1, max=100, help="Tenants to create.")
        ] = 3,
        owners: Annotated[
            int, typer.Option("--owners", min=1, max=1000, help="Owners per tenant.")
        ] = 4,
        tasks: Annotated[
            int, typer.Option("--tasks", min=1, max=100_000, help="Tasks (forks come on top).")
        ] = 60,
        messages: Annotated[
            int, typer.Option("--messages", min=4, max=5_000, help="Average messages per task.")
        ] = 40,
        days: Annotated[
            int, typer.Option("--days", min=1, max=3650, help="Days the activity spans.")
        ] = 28,
        seed: Annotated[int, typer.Option("--seed", help="Same seed, same data.")] = 1,
    ) -> None:
        """Generate a realistic multi-tenant workload and load it (saved with --data FILE)."""
        spec = _spec(tenants, owners, tasks, messages, days, seed)
        options = settings(ctx)

        async def body() -> Workload:
            if options.data is None and not options.uri:
                raise ConfigurationError(
                    "the embedded store lives in memory and would vanish with this command: "
                    "pass --data FILE (before demo-data) to keep it, or --uri mongodb://..."
                )
            with progress_bar() as progress:
                workload = generate(spec, progress=progress)
                async with open_store(ctx) as store:
                    await _refuse_duplicates(store, workload, seed)
                    await load(store, workload, progress=progress)
            return workload

        _summary(run(body()), options.data)
