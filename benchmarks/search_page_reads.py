"""What a search page reads, on the embedded backend: for a few queries in the lexical and
hybrid modes, a page of 10 hits' round trips and bytes received, in all and from
``search_entries`` (the tables of the tasks a lexical ranking's postings name, from
stored form 5, and the snippets' texts). The stored form of the entries decides the
latter (docs/search.md, "Costs"); run it on two checkouts to compare them. Not a bench
module (`python -m benchmarks` skips it):

    PYTHONPATH=src python -m benchmarks.search_page_reads 10000    # messages
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import mindstore
from mindstore.search import HashingEmbedder

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from search_corpus import CONFIG, corpus

PER_TASK = 100
QUERIES = ("hotel", "a the", "booking lisbon", "weather")


async def measure(messages: int) -> dict[str, Any]:
    store = await mindstore.connect("embedded", database="page_reads", embedder=HashingEmbedder(64))
    try:
        acme = store.scoped("acme")
        for talk in corpus(3, max(1, messages // PER_TASK), PER_TASK):  # the bench's corpus
            await acme.tasks.create(owner=talk.owner, config=CONFIG, messages=talk.messages)
        await acme.search("zzz", mode="hybrid")  # indexed and embedded
        out: dict[str, Any] = {"messages": messages}
        for mode in ("lexical", "hybrid"):
            for query in QUERIES:
                with store.backend.recorder.capture() as log:
                    page = await acme.search(query, limit=10, mode=mode)
                read = [c for c in log if c.collection == "search_entries"]
                # the last read of `search_entries` is the snippets' texts; from stored
                # form 5, a lexical ranking reads its tasks' tables there first
                tables = read[:-1] if read and read[-1] is log[-1] else read
                out[f"{mode} {query}"] = {
                    "hits": len(page.hits),
                    "round_trips": log.round_trips,
                    "bytes_received": log.bytes_received,
                    "entries_round_trips": sum(c.round_trips for c in read),
                    "entries_bytes_received": sum(c.bytes_received for c in read),
                    "tables_bytes_received": sum(c.bytes_received for c in tables),
                    "texts_bytes_received": sum(c.bytes_received for c in read)
                    - sum(c.bytes_received for c in tables),
                }
        return out
    finally:
        await store.close()


if __name__ == "__main__":
    print(json.dumps(asyncio.run(measure(int(sys.argv[1]))), indent=1))
