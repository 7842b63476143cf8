"""Analytics report times over about 1,000 tasks / 100,000 messages of one tenant.

The workload is `mindstore.workload` (several owners and models, nested sub-tasks, tool
errors, missing usage, forks), inserted as whole documents. Each report runs `REPEAT`
times; the figure is the fastest run, with the rows it returned and the bytes the server
sent back (command recorder). On the embedded backend mongomock copies every task on
every aggregate, so times measure that copy as much as the pipeline; on a server
(`MINDSTORE_URI`) they are the server's. Run standalone: `python benchmarks/bench_analytics.py`.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from typing import Any, Awaitable, Callable

import mindstore
from mindstore.workload import WorkloadSpec, generate, load

REPEAT = 2
FULL = WorkloadSpec(tenants=1, owners_per_tenant=50, tasks=910, mean_messages=128, days=90, seed=21)
QUICK = WorkloadSpec(tenants=1, owners_per_tenant=20, tasks=91, mean_messages=100, days=90, seed=21)


def _reports(analytics: Any) -> dict[str, Callable[[], Awaitable[Any]]]:
    return {
        "usage_by_model": lambda: analytics.usage(group_by=("model",)),
        "usage_by_model_owner_week": lambda: analytics.usage(group_by=("model", "owner"), period="week"),
        "top_owners_by_cost": lambda: analytics.top_owners(limit=10),
        "latency_by_model": lambda: analytics.latency(group_by=("model",)),
        "tools_by_name": lambda: analytics.tools(),
        "sessions": lambda: analytics.sessions(),
        "subtasks": lambda: analytics.subtasks(),
        "activity_by_day": lambda: analytics.activity(period="day"),
        "active_owners_by_week": lambda: analytics.active_owners(period="week"),
        "usage_one_owner_one_week": lambda: analytics.usage(
            owner="tenant-0-user-3", since="2026-10-05", until="2026-10-12"),
    }  # fmt: skip


def _rows(result: Any) -> int:
    return len(result) if isinstance(result, list) else 1


async def _measure(store: Any, call: Callable[[], Awaitable[Any]]) -> dict[str, Any]:
    times: list[float] = []
    for _ in range(REPEAT):
        with store.backend.recorder.capture() as log:
            start = time.perf_counter()
            result = await call()
            times.append(time.perf_counter() - start)
    return {"ms": round(min(times) * 1000, 1), "rows": _rows(result),
            "bytes_received": log.bytes_received, "round_trips": log.round_trips}  # fmt: skip


async def run(results: dict[str, Any], *, quick: bool = False) -> None:
    spec = QUICK if quick else FULL
    start = time.perf_counter()
    workload = generate(spec)
    generated_s = time.perf_counter() - start
    uri = os.environ.get("MINDSTORE_URI") or "embedded"
    database = os.environ.get("MINDSTORE_BENCH_DATABASE") or f"bench_{uuid.uuid4().hex[:8]}"
    store = await mindstore.connect(uri, database=database)
    try:
        start = time.perf_counter()
        await load(store, workload)
        loaded_s = time.perf_counter() - start
        analytics = store.scoped("tenant-0").analytics
        reports = {name: await _measure(store, call) for name, call in _reports(analytics).items()}
        results["analytics"] = {
            "backend": store.kind,
            "tasks": len(workload.tasks),
            "messages": workload.message_count,
            "generate_s": round(generated_s, 1),
            "insert_s": round(loaded_s, 1),
            "reports": reports,
            "notes": [f"fastest of {REPEAT} runs per report; one tenant holds every task",
                      "embedded times include mongomock copying every task document per aggregate"],
        }  # fmt: skip
    finally:
        if uri and not os.environ.get("MINDSTORE_BENCH_DATABASE"):
            await store.backend.client.drop_database(database)
        await store.close()


if __name__ == "__main__":
    out: dict[str, Any] = {}
    asyncio.run(run(out, quick="--quick" in sys.argv))
    print(json.dumps(out, indent=2))
