"""What the import tests share (no tests here): the store's bytes, a crash hook, and a
rerun-after-crash loop that every source kind runs the same way."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import bson

from mindstore.imports import Receipt, Step
from mindstore.store import Store


async def store_bytes(store: Store) -> dict[str, list[bytes]]:
    """Every document of every collection of the store's database, as BSON, in `_id`
    order: equal before and after means nothing was written."""
    database = store.database
    found = {}
    for name in sorted(await database.list_collection_names()):
        documents = await database[name].find({}).sort("_id", 1).to_list(None)
        found[name] = [bson.encode(document) for document in documents]
    return found


class Crash(Exception):
    """Raised by `crash_after` to stop an import mid-way."""


def crash_after(writes: int) -> Callable[[Step], None]:
    """An `on_step` hook that raises `Crash` at the `writes`-th write (conversations
    finishing are not writes)."""
    seen = 0

    def hook(step: Step) -> None:
        nonlocal seen
        if step.unit == "conversation":
            return
        seen += 1
        if seen == writes:
            raise Crash(f"crashed after write {writes} ({step.conversation})")

    return hook


async def crash_then_resume(
    run: Callable[[Callable[[Step], None] | None, str], Awaitable[Receipt]],
    check: Callable[[str], Awaitable[None]],
    every: int = 1,
) -> int:
    """For every write `k` a full import makes: into a tenant of its own (an empty
    target), crash the import at write `k`, run it again to the end, and `check` that
    tenant. `run(on_step, tenant)` imports. `every`: only every that many writes (and the
    last), to keep a long source cheap. Returns how many writes a full import makes."""
    steps: list[Step] = []
    await run(steps.append, "full")
    writes = sum(1 for step in steps if step.unit != "conversation")
    assert writes > 1
    for k in sorted({*range(1, writes + 1, every), writes}):
        tenant = f"crash-{k}"
        try:
            await run(crash_after(k), tenant)
        except Crash:
            pass
        else:  # pragma: no cover - the hook always fires within a full run
            raise AssertionError(f"the import made fewer than {k} writes")
        receipt = await run(None, tenant)
        assert receipt.verified == len(receipt.conversations)
        await check(tenant)
    return writes


def counts(receipt: Receipt) -> dict[str, Any]:
    return {"read": dict(receipt.read), "written": dict(receipt.written)}


def on_disk(path: Path) -> bytes:
    """A source file's bytes (a source is read, never written)."""
    return path.read_bytes()
