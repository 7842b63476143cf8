"""Dialog forks: time, bytes and round trips per fork for parents of 10 / 1,000 / 10,000
messages, and tree queries over a 1,000-node tree.

A fork copies the kept messages (seed 002's deep copy), so a full copy's bytes grow with
the parent; a trimmed fork (first_k=1, last_n=10) should not, except for the read of the
parent's history. Bytes and round trips come from the command recorder, which counts the
same way on the embedded backend and on a real server.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

import mindstore
from mindstore.model.messages import parse_messages
from mindstore.workload_small import mixed_message_dicts


async def _parent(acme: Any, size: int) -> str:
    messages = parse_messages(mixed_message_dicts(size, seed=size))
    for message in messages:
        message.id = f"{message.id}-{size}"
        message.task_id = ""
    record = await acme.tasks.create(owner="agent", messages=messages, replay=True)
    return record.id


async def _measure(store: Any, coro_factory: Any, repeat: int) -> dict[str, Any]:
    times, sent, received, trips = [], 0, 0, 0
    for _ in range(repeat):
        with store.backend.recorder.capture() as log:
            start = time.perf_counter()
            await coro_factory()
            times.append(time.perf_counter() - start)
        sent, received, trips = log.bytes_sent, log.bytes_received, log.round_trips
    return {"ms": round(min(times) * 1000, 2), "bytes_sent": sent, "bytes_received": received,
            "round_trips": trips}  # fmt: skip


async def run(results: dict[str, Any], *, sizes: tuple[int, ...] = (10, 1_000, 10_000), tree_nodes: int = 1_000) -> None:
    store = await mindstore.connect("embedded")
    try:
        acme = store.scoped("bench")
        forks: dict[str, Any] = {}
        for size in sizes:
            parent = await _parent(acme, size)
            repeat = 3 if size <= 1_000 else 1
            forks[str(size)] = {
                "full_copy": await _measure(store, lambda: acme.dialogs.fork(parent), repeat),
                "trimmed_first1_last10": await _measure(
                    store, lambda: acme.dialogs.fork(parent, last_n=10, first_k=1), repeat),
            }  # fmt: skip
        root = (await acme.dialogs.create("agent", "system prompt")).id
        created = [root]
        while len(created) < tree_nodes:
            parent = created[(len(created) - 1) // 3]  # a ternary tree: depth ~ log3(n)
            created.append((await acme.dialogs.fork(parent)).id)
        queries = {
            "subtree_ids_ms": (await _measure(store, lambda: acme.dialogs.subtree_ids(root), 3))["ms"],
            "tree_overview_ms": (await _measure(store, lambda: acme.dialogs.tree_overview(root), 3))["ms"],
            "children_ms": (await _measure(store, lambda: acme.dialogs.children(root), 3))["ms"],
            "subtree_round_trips": (await _measure(store, lambda: acme.dialogs.subtree_ids(root), 1))["round_trips"],
        }
        results["dialogs"] = {"backend": "embedded", "fork": forks, "tree_nodes": tree_nodes, "tree": queries}
    finally:
        await store.close()


if __name__ == "__main__":
    out: dict[str, Any] = {}
    quick = "--quick" in sys.argv
    asyncio.run(run(out, sizes=(10, 1_000) if quick else (10, 1_000, 10_000)))
    print(json.dumps(out, indent=2))
