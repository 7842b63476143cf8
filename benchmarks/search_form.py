"""The search index's stored form at a size the embedded bench cannot reach in a session:
what a catch-up writes for a tenant of N corpus messages (tests/search_corpus.py, 100 a
task), computed by the index's own code (`entry_for`, `pack_chunks`, `pack_group`,
`block_of`) without a store. Prints bytes per message and the largest document of
`search_postings`, the entries' chunks (with the corpus's message ids, as the bench stores
them, and with 21 random characters, as the store draws them) and the terms documents,
and the index over the text. Not a bench module (`python -m benchmarks` skips it):

    PYTHONPATH=src python -m benchmarks.search_form 1000000 0      # bench-like times
    PYTHONPATH=src python -m benchmarks.search_form 1000000 7.25   # messages 7.25 s apart

The second argument is the seconds between a task's messages: the bench's store writes a
task's 100 messages in one create, within microseconds, so its postings' time differences
take one byte; a conversation's messages seconds apart take three or four. At 100,000
messages and 0 s this agrees with the bench's measured postings within 1.5 % (docs/search.md).
"""

from __future__ import annotations

import json
import random
import string
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import bson

from mindstore.search import postings
from mindstore.search.codec import _plain_codec, entry_for
from mindstore.search.entries import Entry, pack_chunks
from mindstore.search.text import searchable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from search_corpus import conversation

PER_TASK = 100
TASK_ID_CHARS = 21
"""The length of the ids the store makes for tasks (and messages)."""
ID_ALPHABET = string.ascii_letters + string.digits + "_-"


def measure(messages: int, step: float) -> dict[str, Any]:
    codec = _plain_codec(None)
    rng = random.Random(3)  # the bench's corpus seed
    ids = random.Random(7)
    drawn_bytes = chunks = 0
    blocks: dict[tuple[str, int], list[int]] = {}  # (term, block) -> [bytes of `e`, groups]
    written = text_bytes = entries_bytes = entries_largest = terms_bytes = 0
    started = time.perf_counter()
    for t in range(messages // PER_TASK):
        talk = conversation(rng, t, PER_TASK)
        task_id = f"{t:0{TASK_ID_CHARS}d}"
        grouped: dict[str, list[postings.Packed]] = {}
        made: list[Entry] = []
        for index, message in enumerate(talk.messages):
            message.started_ts = 1_765_000_000 + t * 1000 + index * step
            text_bytes += len(searchable(message).text.encode())
            entry = entry_for(message, index, "acme", task_id, codec)
            if entry is None:
                continue
            made.append(entry)
            for term, posting in entry.postings.items():
                grouped.setdefault(term, []).append(posting)
        for chunk in pack_chunks(made, "acme", task_id, talk.owner, codec.seal, t + 1):
            size = len(bson.encode(chunk))
            entries_bytes += size
            entries_largest = max(entries_largest, size)
            chunks += 1
        drawn = [
            replace(e, message_id="".join(ids.choice(ID_ALPHABET) for _ in range(TASK_ID_CHARS)))
            for e in made
        ]
        drawn_bytes += sum(
            len(bson.encode(c))
            for c in pack_chunks(drawn, "acme", task_id, talk.owner, codec.seal, t + 1)
        )
        used = set()
        for term, items in grouped.items():
            for group in postings.pack_group(t + 1, term, items, None):
                block = postings.block_of(written)
                written += postings.group_bytes(group)
                held = blocks.setdefault((term, block), [0, 0])
                held[0] += len(bson.encode({str(held[1]): group})) - 5  # its array element
                held[1] += 1
                used.add(block)
        terms = {"_id": f"acme\x1f{task_id}~terms", "tenant": "acme",
                 "k": [postings.pack_terms(sorted(grouped))], "b": sorted(used),
                 "r": t + 1}  # fmt: skip
        terms_bytes += len(bson.encode(terms))
    stored = largest = 0
    for (term, block), (size, _groups) in blocks.items():
        document = len(bson.encode({"_id": f"acme/{term}/{block}", "tenant": "acme", "e": []}))
        stored += document + size
        largest = max(largest, document + size)
    return {
        "messages": messages,
        "seconds_between_messages": step,
        "seconds": round(time.perf_counter() - started, 1),
        "text_bytes": text_bytes,
        "postings_documents": len(blocks),
        "postings_bytes_per_message": round(stored / messages, 1),
        "postings_largest_document": largest,
        "blocks": postings.block_of(written) + 1,
        "entries_documents": chunks,
        "entries_bytes_per_message": round(entries_bytes / messages, 1),
        "entries_bytes_per_message_21_character_ids": round(drawn_bytes / messages, 1),
        "entries_largest_document": entries_largest,
        "terms_documents_bytes_per_message": round(terms_bytes / messages, 1),
        "index_over_text": round((stored + entries_bytes + terms_bytes) / text_bytes, 2),
    }


if __name__ == "__main__":
    print(json.dumps(measure(int(sys.argv[1]), float(sys.argv[2]))))
