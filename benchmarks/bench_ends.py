"""`tasks.ends()` beside `tail` plus `read_range`: what one snapshot read of both ends costs.

A trimmed fork reads a dialog's first `first` and last `last` messages and its count.
`tasks.ends(task, first, last)` does it in one pipeline over the task document (and the
pages its slices reach); the alternative is two reads, `tail(task, last)` and
`read_range(task, 0, first)`, which are not one snapshot. For a task of 100 / 1,000 /
10,000 messages (`conversation.py`, one bulk `create`), at the default page size (256
messages) and in 3-message pages (100 / 1,000 only: 10,000 messages make 3,333 pages),
`first=2, last=20`: round trips, bytes sent and received, and the median time of `reads`
runs of each, interleaved, on the embedded backend (or `MINDSTORE_URI`); `results["ends"]`
holds each figure and the ratio ends / (tail + read_range). Goal: each ratio at most 1
(`ends()` no slower than `tail` plus `read_range`).
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

import mindstore
from benchmarks.conversation import with_probe
from mindstore import PagePolicy

SIZES = (100, 1_000, 10_000)
PAGED_SIZES = (100, 1_000)
FIRST, LAST = 2, 20
READS = 15


async def _measure(size: int, page_messages: int | None, reads: int) -> dict[str, Any]:
    policy = PagePolicy(page_messages=page_messages) if page_messages else None
    options: dict[str, Any] = {"page_policy": policy} if policy else {}
    store = await mindstore.connect(os.environ.get("MINDSTORE_URI") or "embedded", **options)
    try:
        tasks = store.scoped("bench").tasks
        prefix, probe = with_probe(size)
        messages = [*prefix, *probe]
        tid = (await tasks.create(messages=messages, replay=True)).id
        recorder = store.backend.recorder

        async def ends() -> Any:
            return await tasks.ends(tid, FIRST, LAST)

        async def pair() -> Any:
            tail = await tasks.tail(tid, LAST)
            head = await tasks.read_range(tid, 0, FIRST)
            return head, tail

        figures: dict[str, dict[str, Any]] = {}
        times: dict[str, list[float]] = {"ends": [], "tail_and_read_range": []}
        runs = {"ends": ends, "tail_and_read_range": pair}
        for name, run in runs.items():  # one recorded run each (warm: the header is cached)
            await run()
            with recorder.capture() as log:
                await run()
            figures[name] = log.summary()
        for _ in range(reads):
            for name, run in runs.items():
                start = time.perf_counter()
                await run()
                times[name].append(time.perf_counter() - start)
        count, head, tail = await ends()
        assert count == len(messages) and len(head) == FIRST and len(tail) == LAST
        assert [m.id for m in tail] == [m.id for m in await tasks.tail(tid, LAST)]
        for name in runs:
            figures[name]["median_ms"] = round(statistics.median(times[name]) * 1000, 3)
        ratio = {
            key: round(figures["ends"][key] / figures["tail_and_read_range"][key], 3)
            for key in ("round_trips", "bytes_sent", "bytes_received", "median_ms")
            if figures["tail_and_read_range"][key]
        }
        return {"messages": len(messages), **figures, "ratio_ends_over_pair": ratio}
    finally:
        await store.close()


async def run(results: dict[str, Any], *, reads: int = READS) -> None:
    out: dict[str, Any] = {"first": FIRST, "last": LAST, "reads": reads}
    for size in SIZES:
        out[f"default_pages_{size}"] = await _measure(size, None, reads)
    for size in PAGED_SIZES:
        out[f"pages_of_3_{size}"] = await _measure(size, 3, reads)
    results["ends"] = out
