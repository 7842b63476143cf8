"""Paged message storage: do appends and reads stay flat as a conversation grows without bound?

A task used to be one document holding every message, so a conversation stopped at MongoDB's
16 MiB document limit and an append's cost grew with the document. Paged storage keeps the
header and the open page of recent messages in the task document and moves older messages
into sealed page documents. This module measures the goals side by side in one run, on the
public API only (`mindstore.connect`, `store.scoped(...).tasks`, default options):

1. History length (100 / 10,000 / 100,000 messages in one task, a tool-calling agent
   conversation of about 520 B per stored message): for `appends` warm appends of the same
   probe messages at every size (user, assistant with reasoning, text, a search call and
   usage, tool result), the bytes sent and round trips per append (the command recorder:
   every command, and the `update` alone), bytes beyond the message's own stored BSON; and
   the bytes received for `tail(task, 50)` (the 50 probe messages, identical at every size)
   and for `messages(start, 50)` from the middle of the history.
2. Embedded append time at the largest size against the smallest (median, goal at most 2x),
   with the mean and the max; then appends go on until two of them sealed a page (wrote to
   the page collection) or `seal_cap` appends were made, and the figures of the whole cycle
   between the two seals are reported, so the occasional seal is inside a measured mean and
   max rather than left out.
3. A conversation of `big_messages` messages (every 99th a large tool result: 200,000
   characters, stored inline below the 256 KiB offload threshold; every tenth of those 300,000
   characters, above it, so offloaded) stored through `add_messages` in batches of 297, then
   read back through `messages(start, limit)` in windows and compared message by message (a
   SHA-256 of each message's JSON) with what the appends returned. A `TaskTooLarge` is
   recorded with how many messages were stored, not raised, so the module runs on the code
   before paging (which stops after about 81 large results) and after.

The histories of (1) are written as an agent importing them would: `create` with the first
`build_batch` messages, then `add_messages` batches of `build_batch`, so they have the stored
form appends give (a `create` of the whole history would put it all in one document, or in
one open page to be sealed later). A `TaskTooLarge` on the way is recorded: that size is
then reported as not stored, with the error and the messages stored. Histories come from a
fast seeded generator rather than `conversation.py`, whose in-memory task takes minutes for
100,000 messages.
"""

from __future__ import annotations

import asyncio
import gc
import hashlib
import json
import os
import random
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from itertools import islice
from typing import Any

import bson

import mindstore
from benchmarks.conversation import CONFIG, WORDS
from mindstore.documents import PAYLOADS, TASK_PAGES, TASKS
from mindstore.errors import TaskTooLarge
from mindstore.ids import task_key
from mindstore.model import plans
from mindstore.model.messages import AnyMessage, AssistantMessage, ToolMessage, UserMessage
from mindstore.model.parts import ReasoningPart, TextPart, ToolCallPart, ToolResultPart

SIZES = (100, 10_000, 100_000)
APPENDS = 50
SEAL_CAP = 3_000
SEAL_SECONDS = 60.0
"""The seal cycle also stops after this long (slow appends would make the cap take hours)."""
BUILD_BATCH = 500
"""Messages per `add_messages` call building the histories of goals 1 and 2."""
TAIL = 50
BIG_MESSAGES = 100_000
BIG_BATCH = 297
"""Messages per `add_messages` call in goal 3 (99 turns, three large results)."""
LARGE_EVERY_TURNS = 33
"""Every 33rd turn (99th message) ends on a large tool result."""
LARGE_CHARS = 200_000
OFFLOADED_CHARS = 300_000
OFFLOADED_EVERY = 10
READ_WINDOW = 1_000
GOAL_TIME_RATIO = 2.0
FLAT_RATIO = 1.1
"""'Flat': the largest size's figure at most 10% above the smallest size's."""
TENANT = "bench"
WRITES = frozenset({"insert", "update", "delete", "findAndModify"})
"""Command names that write: one of them on the page collection is a seal (or its repair)."""


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def _spread(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "median": round(statistics.median(ordered), 3),
        "mean": round(statistics.fmean(ordered), 3),
        "p90": round(ordered[int(0.9 * (len(ordered) - 1))], 3),
        "max": round(ordered[-1], 3),
    }


def _words(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))


def turns(
    prefix: str, seed: int, large: Callable[[int], int] | None = None
) -> Iterator[AnyMessage]:
    """An endless tool-calling conversation, three messages a turn (user; assistant with
    reasoning, text, a search call and usage; the tool result), with ids `<prefix><turn>-u/a/t`.
    `large(turn)`: the number of characters of that turn's tool result (0: a small result)."""
    rng = random.Random(seed)
    turn = 0
    while True:
        call = f"{prefix}{turn}"
        yield UserMessage(
            id=f"{call}-u", content=[TextPart(text=f"turn {turn}: " + _words(rng, 8, 30))]
        )
        yield AssistantMessage(
            id=f"{call}-a",
            content=[
                ReasoningPart(reasoning="thinking about " + rng.choice(WORDS)),
                TextPart(text=_words(rng, 10, 60)),
                ToolCallPart(tool_call_id=call, tool_name="search",
                             args={"query": rng.choice(WORDS), "limit": 5}, is_loading=False),
            ],
            status="completed", tokens_in=rng.randint(200, 4000),
            tokens_out=rng.randint(20, 600), cost=0.002,
        )  # fmt: skip
        chars = large(turn) if large is not None else 0
        result: Any
        if chars:
            body = random.Random(f"{seed}/{turn}").randbytes(chars // 2).hex()
            result = {"path": f"/repo/build-{turn}.log", "content": body}
        else:
            result = {
                "hits": [
                    {"title": rng.choice(WORDS), "snippet": _words(rng, 20, 20)} for _ in range(3)
                ]
            }
        yield ToolMessage(
            id=f"{call}-t",
            content=[ToolResultPart(tool_call_id=call, tool_name="search", result=result)],
        )
        turn += 1


def _bson(message: AnyMessage, task_id: str | None = None) -> int:
    return len(bson.encode(plans.stored_doc(message, task_id)))


def _digest(message: AnyMessage) -> str:
    """What was written, less `finished_ts`: a message finishes when the next one starts, so
    the last message of a batch is finished by the next batch (checked apart)."""
    return hashlib.sha256(message.model_dump_json(exclude={"finished_ts"}).encode()).hexdigest()


async def _connect() -> tuple[Any, bool]:
    """(store, drop its database at the end): embedded, or the server of MINDSTORE_URI."""
    uri = os.environ.get("MINDSTORE_URI")
    named = os.environ.get("MINDSTORE_BENCH_DATABASE")
    database = named or f"bench_{uuid.uuid4().hex[:8]}"
    store = await mindstore.connect(uri or "embedded", database=database)
    return store, bool(uri and not named)


async def _close(store: Any, drop: bool) -> None:
    if drop:
        await store.backend.client.drop_database(store.database.name)
    await store.close()


async def _layout(store: Any, task_id: str) -> dict[str, Any]:
    """How the task is stored: the task document, its page documents, its payloads."""
    key = task_key(TENANT, task_id)
    raw = await store.database[TASKS].find_one({"_id": key, "tenant": TENANT})
    pages = await store.database[TASK_PAGES].find({"tenant": TENANT, "task": key}).to_list(None)
    payloads = (
        await store.database[PAYLOADS].find({"tenant": TENANT, "task_id": task_id}).to_list(None)
    )
    return {
        "task_document_bytes": len(bson.encode(raw)),
        "open_messages": len(raw.get("messages", [])),
        "sealed": raw.get("sealed", 0),
        "visible_pages": raw.get("pages", 0),
        "page_documents": len(pages),
        "page_bytes": sum(len(bson.encode(page)) for page in pages),
        "payload_documents": len(payloads),
        "payload_bytes": sum(len(bson.encode(payload)) for payload in payloads),
    }


async def _store_history(
    tasks: Any, size: int, build_batch: int
) -> tuple[str | None, dict[str, Any]]:
    """A task of `size` messages (the config message and `size - 1` conversation messages),
    written as an agent importing it would: `create` with the first batch, then
    `add_messages` batches. Stops at a `TaskTooLarge` (returns None and the error)."""
    history = list(islice(turns("h", 7), size - 1))
    info: dict[str, Any] = {"built_with": f"create + add_messages batches of {build_batch}"}
    start = time.perf_counter()
    task_id = (await tasks.create(config=CONFIG, messages=history[:build_batch], replay=True)).id
    stored = min(build_batch, len(history))
    try:
        while stored < len(history):
            await tasks.add_messages(task_id, history[stored : stored + build_batch])
            stored = min(stored + build_batch, len(history))
    except TaskTooLarge as exc:
        info["error"] = f"TaskTooLarge: {exc}"
        info["stored_messages"] = stored + 1
        info["build_seconds"] = round(time.perf_counter() - start, 1)
        return None, info
    info["build_seconds"] = round(time.perf_counter() - start, 1)
    return task_id, info


async def _append(store: Any, tasks: Any, task_id: str, message: AnyMessage) -> dict[str, Any]:
    size = _bson(message)
    with store.backend.recorder.capture() as log:
        start = time.perf_counter()
        await tasks.add_message(task_id, message)
        elapsed = time.perf_counter() - start
    return {
        "ms": elapsed * 1000, "bytes_sent": log.bytes_sent,
        "update_bytes": log.by_name("update").bytes_sent,
        "round_trips": log.round_trips, "beyond": log.bytes_sent - size,
        "page_writes": sum(1 for c in log if c.collection == TASK_PAGES and c.name in WRITES),
        "page_reads": sum(1 for c in log if c.collection == TASK_PAGES and c.name not in WRITES),
    }  # fmt: skip


def _append_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    sealing = [row for row in rows if row["page_writes"]]
    return {
        "appends": len(rows),
        "ms": _spread([row["ms"] for row in rows]),
        "bytes_sent": _spread([row["bytes_sent"] for row in rows]),
        "update_bytes": _spread([row["update_bytes"] for row in rows]),
        "beyond_message": _spread([row["beyond"] for row in rows]),
        "round_trips": _spread([row["round_trips"] for row in rows]),
        "appends_reading_pages": sum(1 for row in rows if row["page_reads"]),
        "sealing_appends": len(sealing),
        "sealing_ms": [round(row["ms"], 3) for row in sealing],
        "sealing_round_trips": [row["round_trips"] for row in sealing],
        "sealing_bytes_sent": [row["bytes_sent"] for row in sealing],
    }


async def _read(store: Any, task_id: str, call: Callable[[], Any]) -> dict[str, Any]:
    with store.backend.recorder.capture() as log:
        messages = await call()
    stored = sum(_bson(message, task_id) for message in messages)
    return {
        "messages": len(messages), "messages_bson": stored, "bytes_received": log.bytes_received,
        "beyond_messages": log.bytes_received - stored, "bytes_sent": log.bytes_sent,
        "round_trips": log.round_trips,
    }  # fmt: skip


async def _seal_cycle(
    store: Any, tasks: Any, task_id: str, probe: Iterator[AnyMessage], cap: int
) -> dict[str, Any]:
    """Appends until two of them sealed a page (wrote to the page collection), at most `cap`
    appends and about `SEAL_SECONDS`.

    The figures cover one whole cycle, from the append after the first seal through the
    second: the mean is the append cost with its share of one seal. With fewer than two
    seals (no paging, or a page larger than the cap allows), they cover every append made.
    """
    onward: list[dict[str, Any]] = []
    seals: list[int] = []
    deadline = time.perf_counter() + SEAL_SECONDS
    for message in islice(probe, cap):
        onward.append(await _append(store, tasks, task_id, message))
        if onward[-1]["page_writes"]:
            seals.append(len(onward) - 1)
            if len(seals) == 2:
                break
        if time.perf_counter() > deadline:
            break
    cycle = onward[seals[0] + 1 : seals[1] + 1] if len(seals) == 2 else onward
    return {
        **_append_summary(cycle),
        "cap": cap,
        "appends_made": len(onward),
        "seals_seen": len(seals),
        "sealed": len(seals) == 2,
        "first_seal_after": seals[0] + 1 if seals else None,
    }


async def _size_row(size: int, appends: int, seal_cap: int, build_batch: int) -> dict[str, Any]:
    store, drop = await _connect()
    try:
        tasks = store.scoped(TENANT).tasks
        task_id, row = await _store_history(tasks, size, build_batch)
        row["messages"] = size
        if task_id is None:
            row["stored"] = False
            return row
        row["stored"] = True
        await tasks.add_human_message(task_id, "warm up")  # this store wrote the task last
        probe = turns("p", 99)
        gc.collect()
        measured = [await _append(store, tasks, task_id, m) for m in islice(probe, appends)]
        row["appends"] = _append_summary(measured)
        row["tail_50"] = await _read(store, task_id, lambda: tasks.tail(task_id, TAIL))
        middle = size // 2
        row["middle_50"] = await _read(
            store, task_id, lambda: tasks.messages(task_id, middle, TAIL)
        )
        row["middle_50"]["start"] = middle
        row["through_a_seal"] = await _seal_cycle(store, tasks, task_id, probe, seal_cap)
        row["layout"] = await _layout(store, task_id)
        row["stored_messages_after"] = (await tasks.get(task_id)).seq
        return row
    finally:
        await _close(store, drop)


def _large_chars(turn: int) -> int:
    if turn % LARGE_EVERY_TURNS != LARGE_EVERY_TURNS - 1:
        return 0
    nth = turn // LARGE_EVERY_TURNS
    return OFFLOADED_CHARS if nth % OFFLOADED_EVERY == OFFLOADED_EVERY - 1 else LARGE_CHARS


async def _big(total: int) -> dict[str, Any]:
    """Goal 3: `total` messages with large tool results, stored and read back intact."""
    store, drop = await _connect()
    try:
        tasks = store.scoped(TENANT).tasks
        task_id = (await tasks.create(title="large tool results")).id
        stream = turns("b", 11, large=_large_chars)
        digests: list[str] = []
        written_bytes = large_inline = large_offloaded = 0
        error = None
        start = time.perf_counter()
        while len(digests) < total:
            batch = list(islice(stream, min(BIG_BATCH, total - len(digests))))
            try:
                stored = await tasks.add_messages(task_id, batch)
            except TaskTooLarge as exc:
                error = f"TaskTooLarge: {exc}"
                break
            for message in stored:
                digests.append(_digest(message))
                written_bytes += _bson(message, task_id)
                if isinstance(message, ToolMessage) and "content" in message.content[0].result:
                    chars = len(message.content[0].result["content"])
                    large_inline += chars == LARGE_CHARS
                    large_offloaded += chars == OFFLOADED_CHARS
        store_seconds = time.perf_counter() - start
        header = await tasks.get(task_id)
        start = time.perf_counter()
        read = mismatched = unfinished = 0
        first_mismatch = None
        with store.backend.recorder.capture() as log:
            while True:
                window = await tasks.messages(task_id, read, READ_WINDOW)
                for i, message in enumerate(window):
                    index = read + i
                    if index >= len(digests) or _digest(message) != digests[index]:
                        mismatched += 1
                        first_mismatch = index if first_mismatch is None else first_mismatch
                    unfinished += message.finished_ts is None
                read += len(window)
                if len(window) < READ_WINDOW:
                    break
        read_seconds = time.perf_counter() - start
        return {
            "messages_planned": total, "messages_stored": len(digests), "header_seq": header.seq,
            "stored_all": error is None and len(digests) == total,
            "error": error,
            "large_results": {"inline": large_inline, "offloaded": large_offloaded,
                              "inline_chars": LARGE_CHARS, "offloaded_chars": OFFLOADED_CHARS},
            "messages_bson_bytes": written_bytes, "header_size_bytes": header.size_bytes,
            "store_seconds": round(store_seconds, 1),
            "store_messages_per_second": round(len(digests) / max(store_seconds, 1e-9)),
            "read_back": {"messages": read, "mismatched": mismatched,
                          "first_mismatch": first_mismatch,
                          "unfinished": unfinished, "window": READ_WINDOW,
                          "intact": read == len(digests) and mismatched == 0 and unfinished <= 1,
                          "seconds": round(read_seconds, 1), "round_trips": log.round_trips,
                          "bytes_received": log.bytes_received},
            "layout": await _layout(store, task_id),
        }  # fmt: skip
    finally:
        await _close(store, drop)


def _ratio(rows: dict[str, Any], pick: Callable[[dict[str, Any]], float]) -> float | None:
    """`pick` at the largest stored size over the smallest (None: fewer than two stored)."""
    stored = [row for row in rows.values() if row["stored"]]
    return round(pick(stored[-1]) / pick(stored[0]), 2) if len(stored) >= 2 else None


def _most(rows: dict[str, Any], sizes: list[str], figure: str) -> float | None:
    return max((rows[size]["appends"][figure]["max"] for size in sizes), default=None)


def _sealed(row: dict[str, Any]) -> dict[str, float]:
    return dict(row["through_a_seal"]["ms"])


def _goals(rows: dict[str, Any], big: dict[str, Any]) -> dict[str, Any]:
    """Each goal's figure (largest stored size over the smallest) and whether it is met:
    a goal on sizes that could not all be stored is not met."""
    all_stored = all(row["stored"] for row in rows.values())
    stored = [size for size, row in rows.items() if row["stored"]]
    sent = _ratio(rows, lambda r: r["appends"]["bytes_sent"]["median"])
    tail = _ratio(rows, lambda r: r["tail_50"]["bytes_received"])
    median = _ratio(rows, lambda r: r["appends"]["ms"]["median"])
    return {
        "all_sizes_stored": all_stored,
        "ratio_sizes": f"{int(stored[-1]):,} / {int(stored[0]):,}" if len(stored) >= 2 else None,
        "bytes_sent_median_ratio": sent,
        "bytes_sent_max_over_sizes": _most(rows, stored, "bytes_sent"),
        "round_trips_max_over_sizes": _most(rows, stored, "round_trips"),
        "bytes_sent_flat": all_stored and sent is not None and sent <= FLAT_RATIO,
        "tail_50_bytes_ratio": tail,
        "tail_50_flat": all_stored and tail is not None and tail <= FLAT_RATIO,
        "append_ms_median_ratio": median,
        "append_ms_mean_ratio_through_a_seal": _ratio(rows, lambda r: _sealed(r)["mean"]),
        "append_ms_max_ratio_through_a_seal": _ratio(rows, lambda r: _sealed(r)["max"]),
        "append_time_within_goal": all_stored and median is not None and median <= GOAL_TIME_RATIO,
        "big_conversation_intact": big["stored_all"] and big["read_back"]["intact"],
    }  # fmt: skip


async def run(
    results: dict[str, Any],
    *,
    sizes: tuple[int, ...] = SIZES,
    appends: int = APPENDS,
    seal_cap: int = SEAL_CAP,
    build_batch: int = BUILD_BATCH,
    big_messages: int = BIG_MESSAGES,
) -> None:
    rows: dict[str, Any] = {}
    for size in sizes:
        print(f"mindstore bench: paging: {size:,} messages ...", file=sys.stderr, flush=True)
        rows[str(size)] = await _size_row(size, appends, seal_cap, build_batch)
    print(
        f"mindstore bench: paging: {big_messages:,} messages with large results ...",
        file=sys.stderr,
        flush=True,
    )
    big = await _big(big_messages)
    results["paging"] = {
        "backend": "mongodb" if os.environ.get("MINDSTORE_URI") else "embedded",
        "sizes": rows,
        "large_conversation": big,
        "goals": _goals(rows, big),
        "goal_time_ratio": GOAL_TIME_RATIO,
        "flat_ratio": FLAT_RATIO,
        "notes": [
            f"appends: {appends} warm appends of the same probe messages at every size (the "
            "store wrote the task last); bytes counted by the command recorder (command BSON "
            "with $db, replies)",
            "beyond_message: bytes sent minus the appended message's own stored BSON",
            f"through_a_seal: appends after the measured ones until two wrote to {TASK_PAGES} "
            f"(seals), at most {seal_cap} or {SEAL_SECONDS:.0f} s; figures over one whole cycle "
            "(after the first seal through the second), so the mean carries one seal's share; "
            "without two seals, over every append made",
            "tail_50 reads the 50 probe messages just appended (the same at every size); "
            "middle_50 reads 50 messages from the middle of the history",
            f"large conversation: add_messages batches of {BIG_BATCH}, a large tool result every "
            f"{3 * LARGE_EVERY_TURNS} messages; read back with messages(start, {READ_WINDOW}) "
            "and compared by SHA-256 of each message's JSON (less finished_ts, set when the next "
            "message arrives; every message but the last must have it)",
        ],
    }


if __name__ == "__main__":
    out: dict[str, Any] = {}
    asyncio.run(run(out))
    json.dump(out, sys.stdout, indent=2)
