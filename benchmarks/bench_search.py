"""Search (docs/search.md) on the embedded backend, in one run:

- a tenant of `MESSAGES` messages (the seeded corpus of tests/search_corpus.py: agent turns
  with tool calls, five languages), inserted with one create per task;
- the first search, which builds the index (time, round trips);
- steady searches: round trips of each (goal: at most 2 before the snippets' read, which
  is reported apart), p50/p95 latency over `QUERIES` queries, beside a scan of
  `tasks.messages` over every task for the same words (p95 over a few scans, and the
  ratio);
- a phrase of the two commonest words (`"a the"`) and the same words unquoted: round trips
  and bytes (a phrase is checked on the postings' word positions, so it reads no text per
  candidate);
- the first search after one append to one task: round trips and bytes (the catch-up of
  one message, then the answer);
- the index's stored size (BSON of the three collections) against the indexed text's size;
- append cost with search on (the tenant indexed and searched between appends' rounds) and
  without (a tenant never searched): median warm `add_human_message` time, interleaved,
  goal at most 1.1x; bytes sent per append, which must be equal (an append writes nothing
  for search).
"""

from __future__ import annotations

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

MESSAGES = 100_000
PER_TASK = 100
QUERIES = 60
SCANS = 3
APPENDS = 60
APPEND_GOAL = 1.1
ROUND_TRIP_GOAL = 2


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _bytes(database: Any, name: str, tenant: str) -> int:
    found = await database[name].find({"tenant": tenant}).to_list(None)
    return sum(len(bson.encode(d)) for d in found)


async def run(results: dict[str, Any], messages: int = MESSAGES, queries: int = QUERIES) -> None:
    store = await mindstore.connect("memory:")
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

    with recorder.capture() as log:
        started = time.perf_counter()
        await acme.search("hotel")
        first = time.perf_counter() - started
    first_round_trips = log.round_trips

    drawn = [rng.sample(w, min(len(w), rng.randint(1, 2))) for w in rng.sample(words, queries)]
    latencies, round_trips, before_snippets = [], [], []
    for query in drawn:
        with recorder.capture() as log:
            started = time.perf_counter()
            await acme.search(" ".join(query), limit=10)
            latencies.append(time.perf_counter() - started)
        round_trips.append(log.round_trips)
        before_snippets.append(sum(c.round_trips for c in log if c.collection != "search_entries"))

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
    for query in drawn[:SCANS]:
        started = time.perf_counter()
        found = 0
        for task_id in task_ids:
            for message in await acme.tasks.messages(task_id):
                held = set(terms(searchable(message).text))
                found += all(w in held for w in query)
        scans.append(time.perf_counter() - started)

    index_bytes = {name: await _bytes(store.database, name, "acme")
                   for name in ("search_postings", "search_entries", "search_tasks")}  # fmt: skip

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

    results["search"] = {
        "messages": messages,
        "load_seconds": round(loaded, 2),
        "first_search": {"seconds": round(first, 2), "round_trips": first_round_trips},
        "search": {
            "queries": queries,
            "p50_ms": round(_p(latencies, 0.5) * 1000, 1),
            "p95_ms": round(_p(latencies, 0.95) * 1000, 1),
            "max_round_trips": max(round_trips),
            "max_round_trips_before_snippets": max(before_snippets),
            "round_trip_goal": ROUND_TRIP_GOAL,
            "meets_round_trip_goal": max(before_snippets) <= ROUND_TRIP_GOAL,
        },
        "common_words": common,
        "first_search_after_one_append": after_append,
        "scan": {"scans": len(scans), "p95_ms": round(_p(scans, 0.95) * 1000, 1)},
        "scan_to_search_p95_ratio": round(_p(scans, 0.95) / _p(latencies, 0.95), 1),
        "index_bytes": index_bytes,
        "text_bytes": text_bytes,
        "index_to_text_ratio": round(sum(index_bytes.values()) / text_bytes, 2),
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
