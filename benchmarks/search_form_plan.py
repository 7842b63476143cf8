"""A projection, not a form mindstore writes: what a leaner stored form of the lexical
index would take per message, beside today's (form 4), on the bench's corpus
(tests/search_corpus.py, 100 messages a task), computed without a store. It prices the
plan docs/search.md gives for the goal of an index at most 2x the text ("Against the goal
of 2x"), part by part, so the next form is built against figures rather than hopes:

- postings: a group names its task by a per-tenant ordinal (an int32, not the task's
  21-character id) and its owner by an ordinal (one byte here), and a posting keeps only
  the message's index, the term's count and its positions: a message's length, role and
  time move to
- a per-task message table (length and role in one varint, then the time's difference),
  read for the tasks a query's postings name;
- entries: a task's indexed messages packed in one document (index, id, text; zlib),
  with 21-character random ids as the store draws them (the bench's ids are shorter).
  Form 4 built this part (`search.entries.pack_chunks`, which "today" is computed with,
  with the same ids), bounded: chunks of at most 64 messages and 8 KiB of text, so it
  takes a few bytes a message more than one document per task;
- the task's terms (what a delete pulls) compressed in its mark.

    PYTHONPATH=src python -m benchmarks.search_form_plan 10000 7.25   # messages, seconds apart

Not a bench module (`python -m benchmarks` skips it). Each form's postings include its
block documents' own fields (`_id`, tenant).
"""

from __future__ import annotations

import json
import random
import string
import sys
import zlib
from dataclasses import replace
from pathlib import Path
from typing import Any

import bson

from mindstore.search import postings
from mindstore.search.codec import _plain_codec, entry_for
from mindstore.search.entries import pack_chunks
from mindstore.search.text import searchable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from search_corpus import conversation

PER_TASK = 100
ID_ALPHABET = string.ascii_letters + string.digits + "_-"


def _lean_group(items: list[postings.Packed]) -> bytes:
    """A group of the plan: the owner's ordinal, then index gap, count, position gaps."""
    out = bytearray([1])
    previous = 0
    for item in items:
        postings._varint(out, item.index - previous)
        previous = item.index
        postings._varint(out, len(item.positions))
        postings._gaps(out, item.positions)
    return bytes(out)


def _element(group: dict[str, Any]) -> int:
    """The bytes one group adds to a block's `e` array (its key and sub-document)."""
    return len(bson.encode({"0": group})) - 5


def measure(messages: int, step: float) -> dict[str, Any]:
    codec = _plain_codec(None)
    rng, ids = random.Random(3), random.Random(7)
    now: dict[str, int] = {"postings": 0, "entries": 0, "terms": 0}
    plan: dict[str, int] = {"postings": 0, "entries": 0, "table": 0, "terms": 0}
    text = 0
    documents: dict[str, set[tuple[str, int]]] = {"today": set(), "plan": set()}
    written = {"today": 0, "plan": 0}
    for t in range(messages // PER_TASK):
        talk = conversation(rng, t, PER_TASK)
        task_id = f"{t:021d}"
        grouped: dict[str, list[postings.Packed]] = {}
        rows, table, last = [], bytearray(), 0
        made = []
        for index, message in enumerate(talk.messages):
            message.started_ts = 1_765_000_000 + t * 1000 + index * step
            text += len(searchable(message).text.encode())
            entry = entry_for(message, index, "acme", task_id, codec)
            if entry is None:
                continue
            drawn = "".join(ids.choice(ID_ALPHABET) for _ in range(21))
            made.append(replace(entry, message_id=drawn))
            rows.append(f"{index}\x1f{drawn}\x1f{entry.text}")
            first = next(iter(entry.postings.values()))
            code = postings.ROLE_CODES.get(first.role, 15)
            postings._varint(table, first.length << 4 | code)
            postings._varint(table, postings._zigzag(first.time - last))
            last = first.time
            for term, posting in entry.postings.items():
                grouped.setdefault(term, []).append(posting)
        now["entries"] += sum(
            len(bson.encode(c)) for c in pack_chunks(made, "acme", task_id, talk.owner, codec.seal)
        )
        packed = zlib.compress("\n".join(rows).encode(), 6)
        chunk = {"_id": f"acme\x1f{task_id}/0", "tenant": "acme", "task": task_id,
                 "z": bson.Binary(packed)}  # fmt: skip
        plan["entries"] += len(bson.encode(chunk))
        plan["table"] += len(bson.encode({"mt": bson.Binary(bytes(table))})) - 5
        for term, items in grouped.items():
            for group in postings.pack_group(task_id, talk.owner, term, items, None):
                now["postings"] += _element(group)
                documents["today"].add((term, postings.block_of(written["today"])))
                written["today"] += len(group["p"])
            lean = _lean_group(items)
            plan["postings"] += _element({"t": t, "p": bson.Binary(lean)})
            documents["plan"].add((term, postings.block_of(written["plan"])))
            written["plan"] += len(lean)
        terms = sorted(grouped)
        now["terms"] += len(bson.encode({"_id": f"acme\x1f{task_id}~terms", "tenant": "acme",
                                         "k": terms, "b": [0]}))  # fmt: skip
        plan["terms"] += len(
            bson.encode({"k": bson.Binary(zlib.compress("\n".join(terms).encode(), 6))})
        )
    for form, held in (("today", now), ("plan", plan)):  # each block document's own fields
        held["postings"] += sum(
            len(bson.encode({"_id": f"acme/{term}/{block}", "tenant": "acme", "e": []}))
            for term, block in documents[form]
        )
    return {
        "messages": messages,
        "seconds_between_messages": step,
        "text_bytes_per_message": round(text / messages, 1),
        "today": {k: round(v / messages, 1) for k, v in now.items()},
        "plan": {k: round(v / messages, 1) for k, v in plan.items()},
        "today_over_text": round(sum(now.values()) / text, 2),
        "plan_over_text": round(sum(plan.values()) / text, 2),
    }


if __name__ == "__main__":
    print(json.dumps(measure(int(sys.argv[1]), float(sys.argv[2]))))
