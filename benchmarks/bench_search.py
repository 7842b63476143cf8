"""Search (docs/search.md) on the embedded backend, in one run, side by side at each size
of `SIZES` (100,000 messages; 1,000,000 with ``MINDSTORE_BENCH_SEARCH_SIZES=100000,1000000``,
see docs/search.md "Costs" for what a run of that size takes here):

- a tenant of that many messages (the seeded corpus of tests/search_corpus.py: agent turns
  with tool calls, five languages), inserted with one create per task;
- the first search, which builds the index (time, round trips);
- steady searches in each mode the store offers (`modes`: lexical "all" today, lexical
  "any" where `search` takes `match`, semantic and hybrid where the store has an embedder:
  `embedder_for_bench` is the slot for it): round trips of each (goal: at most 2 before the
  snippets' read, which is reported apart), p50/p95 latency over `QUERIES` queries; at the
  first size only, beside a scan of `tasks.messages` over every task for the same words;
- a phrase of the two commonest words (`"a the"`) and the same words unquoted: round trips
  and bytes (a phrase is checked on the postings' word positions, so it reads no text per
  candidate);
- the first search after one append to one task: round trips and bytes (the catch-up of
  one message, then the answer);
- each index's stored size (BSON of every `search*` collection: bytes, bytes per message,
  the largest document) against the indexed text's size;
- append cost with search on (the tenant indexed and searched between appends' rounds) and
  without (a tenant never searched): median warm `add_human_message` time, interleaved,
  goal at most 1.1x; bytes sent per append, which must be equal (an append writes nothing
  for search).
"""

from __future__ import annotations

import inspect
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import bson

import mindstore
from mindstore.search.text import searchable
from mindstore.search.tokenize import terms

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from search_corpus import CONFIG, FILLER, corpus

SIZES = (100_000,)
"""Tenant sizes measured side by side (`MINDSTORE_BENCH_SEARCH_SIZES`: a comma list)."""
PER_TASK = 100
QUERIES = 60
LARGE_QUERIES = 10
"""Queries per mode at a size of `LARGE` messages or more: in the process, a search by
meaning reads every vector of the tenant (about half a GB at a million), so 60 queries of
each mode would take hours; the size's figures say how many were run."""
LARGE = 1_000_000
SCANS = 1
APPENDS = 60
APPEND_GOAL = 1.1
ROUND_TRIP_GOAL = 2


def embedder_for_bench() -> object | None:
    """The embedder the semantic and hybrid modes are measured with: the deterministic
    `HashingEmbedder` at MiniLM's 384 dimensions, so the stored bytes and the ranking's
    cost are a real model's while embedding costs nothing (a model's own time is its
    vendor's figure; recall quality is benchmarks/bench_recall.py's). With
    MINDSTORE_BENCH_SEARCH_EMBEDDER=none, lexical modes only."""
    if os.environ.get("MINDSTORE_BENCH_SEARCH_EMBEDDER", "") == "none":
        return None
    from mindstore.search import HashingEmbedder

    return HashingEmbedder(384)


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _sizes() -> tuple[int, ...]:
    raw = os.environ.get("MINDSTORE_BENCH_SEARCH_SIZES", "")
    return tuple(int(n) for n in raw.split(",") if n.strip()) or SIZES


def _modes(view: Any, embedder: object | None) -> dict[str, dict[str, Any] | str]:
    """Mode name -> the keyword arguments of `search` that select it, or why it is not run."""
    accepted = inspect.signature(view.search).parameters
    modes: dict[str, dict[str, Any] | str] = {}
    lexical = {"mode": "lexical"} if "mode" in accepted else {}
    if "match" in accepted:
        modes["lexical-any"] = {**lexical, "match": "any"}
        modes["lexical-all"] = {**lexical, "match": "all"}
    else:
        modes["lexical-all"] = {}
    for mode in ("semantic", "hybrid"):
        if "mode" not in accepted:
            modes[mode] = "not run: this store's search has no `mode`"
        elif embedder is None:
            modes[mode] = "not run: no embedder (`embedder_for_bench`)"
        else:
            modes[mode] = {"mode": mode}
    return modes


async def _stored(database: Any, tenant: str, messages: int) -> dict[str, dict[str, Any]]:
    """Every `search*` collection's documents of `tenant`: bytes, per message, largest."""
    out = {}
    for name in sorted(await database.list_collection_names()):
        if not name.startswith("search"):
            continue
        sizes = [len(bson.encode(d)) async for d in database[name].find({"tenant": tenant})]
        if sizes:
            out[name] = {
                "documents": len(sizes),
                "bytes": sum(sizes),
                "bytes_per_message": round(sum(sizes) / messages, 1),
                "largest_document": max(sizes),
            }
    return out


async def _one(messages: int, queries: int, scan: bool) -> dict[str, Any]:
    embedder = embedder_for_bench()
    options = {} if embedder is None else {"embedder": embedder}
    store = await mindstore.connect("memory:", **options)
    acme = store.scoped("acme")
    rng = random.Random(7)
    started = time.perf_counter()
    text_bytes = 0
    words: list[list[str]] = []
    task_ids: list[str] = []
    for conversation in corpus(3, max(1, messages // PER_TASK), PER_TASK):
        record = await acme.tasks.create(owner=conversation.owner, config=CONFIG,
                                         messages=conversation.messages)  # fmt: skip
        task_ids.append(record.id)
        for message in conversation.messages:
            text = searchable(message).text
            text_bytes += len(text.encode())
            found = sorted(set(terms(text)) - set(FILLER))
            if found:
                words.append(found)
    loaded = time.perf_counter() - started
    recorder = store.backend.recorder
    modes = _modes(acme, embedder)

    with recorder.capture() as log:
        started = time.perf_counter()
        await acme.search("hotel")
        first = time.perf_counter() - started
    first_round_trips = log.round_trips

    drawn = [rng.sample(w, min(len(w), rng.randint(1, 2))) for w in rng.sample(words, queries)]
    by_mode: dict[str, Any] = {}
    for mode, chosen in modes.items():
        if isinstance(chosen, str):
            by_mode[mode] = chosen
            continue
        latencies, round_trips, before_snippets, empty = [], [], [], 0
        for query in drawn:
            with recorder.capture() as log:
                started = time.perf_counter()
                page = await acme.search(" ".join(query), limit=10, **chosen)
                latencies.append(time.perf_counter() - started)
            empty += not page.hits
            round_trips.append(log.round_trips)
            # the last find of `search_entries` reads the page's texts; an earlier one (the
            # tables of the tasks the postings name) is part of the ranking
            texts = log[-1].round_trips if log and log[-1].collection == "search_entries" else 0
            before_snippets.append(log.round_trips - texts)
        by_mode[mode] = {
            "queries": queries,
            "p50_ms": round(_p(latencies, 0.5) * 1000, 1),
            "p95_ms": round(_p(latencies, 0.95) * 1000, 1),
            "no_hit": empty,
            "max_round_trips": max(round_trips),
            "max_round_trips_before_snippets": max(before_snippets),
            "round_trip_goal": ROUND_TRIP_GOAL,
            "meets_round_trip_goal": max(before_snippets) <= ROUND_TRIP_GOAL,
        }

    common: dict[str, Any] = {}
    for label, query in (("phrase", '"a the"'), ("words", "a the")):
        with recorder.capture() as log:
            page = await acme.search(query, limit=10)
        common[label] = {
            "query": query,
            "round_trips": log.round_trips,
            "total": page.total,
            "bytes_sent": log.bytes_sent,
            "bytes_received": log.bytes_received,
        }

    await acme.tasks.add_human_message(task_ids[0], "one more hotel in Lisbon")
    with recorder.capture() as log:
        await acme.search("hotel", limit=10)
    after_append = {"round_trips": log.round_trips, "bytes_sent": log.bytes_sent,
                    "bytes_received": log.bytes_received}  # fmt: skip

    scans = []
    for query in drawn[: SCANS if scan else 0]:
        started = time.perf_counter()
        found = 0
        for task_id in task_ids:
            for message in await acme.tasks.messages(task_id):
                held = set(terms(searchable(message).text))
                found += all(w in held for w in query)
        scans.append(time.perf_counter() - started)

    stored = await _stored(store.database, "acme", messages)
    lexical = ("search_postings", "search_entries", "search_tasks")
    lexical_bytes = sum(stored[name]["bytes"] for name in lexical if name in stored)

    # appends: a tenant that is searched between rounds, and one never searched
    searched, plain = store.scoped("with"), store.scoped("none")  # names of one length
    with_search, without, sent = [], [], {"with": [], "none": []}
    tasks = {}
    for view in (searched, plain):
        record = await view.tasks.create(config=CONFIG)
        await view.tasks.add_human_message(record.id, "warm up the header cache")
        tasks[view.tenant] = record.id
    await searched.search("warm")
    for n in range(APPENDS):
        for view, times in ((searched, with_search), (plain, without)):
            with recorder.capture() as log:
                started = time.perf_counter()
                await view.tasks.add_human_message(tasks[view.tenant], f"append {n} lisbon")
                times.append(time.perf_counter() - started)
            sent[view.tenant].append(log.bytes_sent)
        if n % 10 == 9:
            await searched.search("lisbon")
    ratio = statistics.median(with_search) / statistics.median(without)
    await store.close()

    lexical_p95 = next(m for m in by_mode.values() if isinstance(m, dict))["p95_ms"]
    return {
        "messages": messages,
        "load_seconds": round(loaded, 2),
        "first_search": {"seconds": round(first, 2), "round_trips": first_round_trips},
        "modes": by_mode,
        "common_words": common,
        "first_search_after_one_append": after_append,
        "scan": (
            {
                "scans": len(scans),
                "p95_ms": round(_p(scans, 0.95) * 1000, 1),
                "to_search_p95_ratio": round(_p(scans, 0.95) * 1000 / lexical_p95, 1),
            }
            if scans
            else "not run at this size"
        ),
        "stored": stored,
        "text_bytes": text_bytes,
        "lexical_index_bytes_per_message": round(lexical_bytes / messages, 1),
        "lexical_index_to_text_ratio": round(lexical_bytes / text_bytes, 2),
        "largest_document": max((s["largest_document"] for s in stored.values()), default=0),
        "append": {
            "median_us_search_on": round(statistics.median(with_search) * 1e6),
            "median_us_search_off": round(statistics.median(without) * 1e6),
            "ratio": round(ratio, 3),
            "goal": APPEND_GOAL,
            "meets_goal": ratio <= APPEND_GOAL,
            "bytes_sent_on": statistics.median(sent["with"]),
            "bytes_sent_off": statistics.median(sent["none"]),
        },
    }


def _side(m: dict[str, Any]) -> dict[str, Any]:
    """One size's figures in one row: the side-by-side table."""
    timed = {mode: r for mode, r in m["modes"].items() if isinstance(r, dict)}
    return {
        "first_index_s": m["first_search"]["seconds"],
        **{f"{mode}_p50_ms": r["p50_ms"] for mode, r in timed.items()},
        **{f"{mode}_p95_ms": r["p95_ms"] for mode, r in timed.items()},
        **{f"{name}_bytes_per_message": s["bytes_per_message"] for name, s in m["stored"].items()},
        "lexical_index_to_text_ratio": m["lexical_index_to_text_ratio"],
        "largest_document": m["largest_document"],
        "append_ratio_on_off": m["append"]["ratio"],
        "append_bytes_sent_on_off": [m["append"]["bytes_sent_on"], m["append"]["bytes_sent_off"]],
    }


async def run(
    results: dict[str, Any],
    messages: int | None = None,
    queries: int = QUERIES,
    sizes: tuple[int, ...] | None = None,
) -> None:
    """Measure each size in turn (`messages`: one size, as `--quick` asks)."""
    chosen = (messages,) if messages is not None else sizes or _sizes()
    measured = {}
    for n, size in enumerate(chosen):
        print(f"  search: {size:,} messages", file=sys.stderr, flush=True)
        asked = min(queries, LARGE_QUERIES) if size >= LARGE else queries
        measured[str(size)] = await _one(size, asked, scan=n == 0)
    side = {size: _side(m) for size, m in measured.items()}
    results["search"] = {"side_by_side": side, "sizes": measured}
