"""Appending on the embedded backend: does the cost grow with the history?

On a server an append (one guarded `$set messages.<n>`) costs the same at any history
length. mongomock, under the embedded backend, used to copy and compare the whole document
on every update and scan every message for the exactly-once guard, so an append cost time
in proportion to the task. The backend's fast update path (`fast_updates`, on by default)
applies mindstore's updates in place; this benchmark measures both side by side.

For 100, 1,000 and 10,000 messages: a task prefilled (unrecorded, one insert) with the
realistic conversation of `conversation.py`, then `appends` appends of the same probe
message (the probe turn's user message, a fresh id each time) through the real task
repository (`mindstore.connect("embedded")`, warm: the header is cached, so an append is
one guarded update). Reported: the median and 90th percentile per append, the first append
(the fast path builds its guard index there), for the fast path and for the old path
(`client.fast_updates = False`) in the same run; and the ratio of the median at 10,000 to
the median at 100 against the goal (at most 5x).

Reads by `_id` (`results["embedded"]["reads_by_id"]`): mongomock tested every document of
the collection on every read, so a read by `_id` cost time in proportion to the
collection; the backend's lookup by key (`fast_reads`, on by default) does not. For 1,000
and 10,000 small documents (`{"_id": "bench/doc-N", "tenant": "bench", "n": N}`), `reads`
`find_one` calls with mindstore's filter shape (`{"tenant": ..., "_id": ...}`) on ids
drawn with a fixed seed (a tenth of them missing), through the backend's async collection,
with the lookup and with the scan (`client.fast_reads = False`) in the same run: the
median and 90th percentile per read, and the scan's median over the lookup's; and the same
for a `find` of two ids (`{"_id": {"$in": [a, b]}}`, `lookup_in_two` / `scan_in_two`),
whose found documents the lookup puts in the store's order by each key's recorded place.
"""

from __future__ import annotations

import asyncio
import gc
import json
import random
import statistics
import time
from typing import Any

import bson

import mindstore
from benchmarks.conversation import with_probe
from mindstore.ids import task_key
from mindstore.model import plans

SIZES = (100, 1_000, 10_000)
APPENDS = 21
GOAL_RATIO = 5.0
READ_SIZES = (1_000, 10_000)
READS = 41


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


async def _appends(fast: bool, prefix: list[Any], probe: Any, appends: int) -> dict[str, Any]:
    """Prefill a task with `prefix`, then time `appends` + 1 appends of `probe`."""
    store = await mindstore.connect("embedded")
    store.backend.client.fast_updates = fast
    tasks = store.scoped("bench").tasks
    messages = [m.model_copy(deep=True) for m in prefix]
    tid = (await tasks.create(messages=messages, replay=True)).id
    times = []
    gc.collect()
    for i in range(appends + 1):
        message = probe.model_copy(update={"id": f"probe-{i}"}, deep=True)
        start = time.perf_counter()
        await tasks.add_message(tid, message)
        times.append(time.perf_counter() - start)
    raw = await store.database["tasks"].find_one({"_id": task_key("bench", tid)})
    await store.close()
    measured = sorted(times[1:])
    return {
        "median_ms": _ms(statistics.median(measured)),
        "p90_ms": _ms(measured[int(0.9 * (len(measured) - 1))]),
        "first_ms": _ms(times[0]),
        "stored_messages": len(raw["messages"]),
        "document_bytes": len(bson.encode(raw)),
        "ids": [m["id"] for m in raw["messages"]],
    }


def _spread(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {
        "median_ms": _ms(statistics.median(ordered)),
        "p90_ms": _ms(ordered[int(0.9 * (len(ordered) - 1))]),
    }


async def _reads_by_id(size: int, reads: int) -> dict[str, Any]:
    """`reads` find_one by `_id` in a collection of `size` small documents, with the
    lookup and with the scan, on one client (the same documents, the same ids)."""
    store = await mindstore.connect("embedded")
    client = store.backend.client
    collection = store.database["bench_reads"]
    await collection.insert_many(
        [{"_id": f"bench/doc-{n}", "tenant": "bench", "n": n} for n in range(size)]
    )
    draw = random.Random(size)
    keys = [f"bench/doc-{draw.randrange(size + size // 9)}" for _ in range(reads)]
    pairs = [[keys[n], keys[n - 1]] for n in range(reads)]  # later id first: put in order
    row: dict[str, Any] = {"documents": size, "reads": reads}
    found: dict[str, list[Any]] = {}
    for path, fast in (("lookup", True), ("scan", False)):
        client.fast_reads = fast
        times, documents = [], []
        gc.collect()
        for key in keys:
            start = time.perf_counter()
            document = await collection.find_one({"tenant": "bench", "_id": key})
            times.append(time.perf_counter() - start)
            documents.append(document)
        row[path] = _spread(times)
        found[path] = documents
        times, listed = [], []
        for pair in pairs:
            start = time.perf_counter()
            cursor = collection.find({"tenant": "bench", "_id": {"$in": pair}})
            listed.append(await cursor.to_list(None))
            times.append(time.perf_counter() - start)
        row[f"{path}_in_two"] = _spread(times)
        found[f"{path}_in_two"] = listed
    await store.close()
    row["scan_over_lookup"] = round(row["scan"]["median_ms"] / row["lookup"]["median_ms"], 1)
    row["in_two_scan_over_lookup"] = round(
        row["scan_in_two"]["median_ms"] / row["lookup_in_two"]["median_ms"], 1
    )
    row["same_documents_read"] = (
        found["lookup"] == found["scan"] and found["lookup_in_two"] == found["scan_in_two"]
    )
    row["missing_ids_read"] = sum(document is None for document in found["lookup"])
    return row


async def run(
    results: dict[str, Any],
    *,
    sizes: tuple[int, ...] = SIZES,
    appends: int = APPENDS,
    read_sizes: tuple[int, ...] = READ_SIZES,
    reads: int = READS,
) -> None:
    rows: dict[str, Any] = {}
    probe_size = 0
    for size in sizes:
        prefix, probe_turns = with_probe(size)
        probe = probe_turns[0]  # the probe turn's user message
        probe_size = len(bson.encode(plans.stored_doc(probe)))
        fast = await _appends(True, prefix, probe, appends)
        old = await _appends(False, prefix, probe, appends)
        same = fast.pop("ids") == old.pop("ids")
        rows[str(size)] = {
            "prefilled_messages": len(prefix),
            "stored_messages_after": fast["stored_messages"],
            "document_bytes": fast["document_bytes"],
            "fast": {k: fast[k] for k in ("median_ms", "p90_ms", "first_ms")},
            "old": {k: old[k] for k in ("median_ms", "p90_ms", "first_ms")},
            "old_over_fast": round(old["median_ms"] / fast["median_ms"], 1),
            "same_messages_stored": same,
        }
    first, last = rows[str(sizes[0])], rows[str(sizes[-1])]
    ratio = {
        path: round(last[path]["median_ms"] / first[path]["median_ms"], 2)
        for path in ("fast", "old")
    }
    results["embedded"] = {
        "backend": "embedded",
        "appends_measured": appends,
        "probe_message_bson": probe_size,
        "sizes": rows,
        f"ratio_{sizes[-1]}_to_{sizes[0]}": ratio,
        "goal_ratio": GOAL_RATIO,
        "within_goal": ratio["fast"] <= GOAL_RATIO,
        "notes": [
            "median of the measured appends, after one unmeasured first append (its time is "
            "first_ms: the fast path indexes the guarded message ids there)",
            "old = the same backend with client.fast_updates = False (mongomock's own update: "
            "the whole document copied and compared, every message scanned by the id guard)",
            "warm appends: the header is cached, so each append is one guarded update",
        ],
        "reads_by_id": {str(size): await _reads_by_id(size, reads) for size in read_sizes},
        "reads_notes": [
            "find_one({'tenant': ..., '_id': ...}) through the embedded async collection; "
            "lookup = the backend's lookup by key (client.fast_reads, the default), scan = "
            "mongomock's test of every document (client.fast_reads = False)",
        ],
    }


if __name__ == "__main__":
    out: dict[str, Any] = {}
    asyncio.run(run(out))
    print(json.dumps(out, indent=2))
