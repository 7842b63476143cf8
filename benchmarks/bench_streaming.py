"""What a streamed answer sends: the bytes of every write, before and after chunks (issue 30).

An answer is streamed a word at a time into one assistant message (`tasks.stream`, writes
triggered by `flush_bytes` only, so the figures do not depend on the machine's speed) and
every update is recorded as sent (`capture(payloads=True)`). Each case runs twice in the
same run on the same code: `before`, every write sending the part's whole text so far (the
earlier form, `MessageStream.push_chunks = False`), and `after`, every write pushing only
what arrived since the last one; then both again on a store with a keyring (`keyring`:
`whole_parts`, as encrypted tenants streamed before issue 33's chunks, and `chunks`, each
chunk pushed sealed). Goal: bytes sent at most 1.5x the answer's text plus a
bounded overhead per write (`PER_WRITE_BOUND`), whatever the answer's length.

    python -m benchmarks --only streaming
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import mindstore
from mindstore.crypto import Keyring, LocalMasterKey
from mindstore.model.parts import TaskConfigPart
from mindstore.model.storage_form import CHUNKS_KEY

CONFIG = TaskConfigPart(model_name="m")
TEXT_BOUND = 1.5
PER_WRITE_BOUND = 400
"""Bytes a write may send beside its new text: filter (task key, tenant, version,
updated_at, the chunk guard), the chunk's path, size_bytes, version, updated_at, envelope."""
CASES = (
    ("2,000 one-word deltas, flush_bytes=1024 (default)", 2_000, 1024),
    ("2,000 one-word deltas, flush_bytes=256", 2_000, 256),
    ("100 KB answer, flush_bytes=256", 11_000, 256),
)
EARLIER = {
    "commit": "e69988b",
    "issue_30": {"2,000 one-word deltas, flush_bytes=1024 (default)": {"bytes_sent": 161_329, "writes": 17},
                 "2,000 one-word deltas, flush_bytes=256": {"bytes_sent": 589_420, "writes": 66},
                 "100 KB answer, flush_bytes=256": {"bytes_sent": 19_400_000, "writes": None}},
}  # fmt: skip
"""The figures issue 30 measured on the code before (the 100 KB one rounded to 19.4 MB)."""


def _new_text_bytes(update: Any) -> int:
    """Bytes of the text one streaming update carries: a part set whole, its text set, or a
    chunk (under a keyring: the ciphertext, the text's bytes plus 30)."""
    for key, value in update.update.get("$push", {}).items():
        if key.endswith(CHUNKS_KEY):
            return _size(value)
    for key, value in update.update["$set"].items():
        if ".content." in key:
            return _size(value if isinstance(value, (str, bytes)) else value.get("text", ""))
    return 0


def _size(value: Any) -> int:
    return len(value) if isinstance(value, bytes) else len(str(value).encode())


async def _stream(store: Any, words: int, flush_bytes: int, chunks: bool) -> dict[str, Any]:
    acme = store.scoped("bench-streaming")
    tid = (await acme.tasks.create(config=CONFIG)).id
    await acme.tasks.add_human_message(tid, "write me an essay")
    assistant = await acme.tasks.add_assistant_message(tid)
    text = "".join(f"word{i} " for i in range(words))
    stream = acme.tasks.stream(tid, assistant.id, flush_bytes=flush_bytes, flush_ms=3_600_000)
    stream.push_chunks = chunks
    with store.backend.recorder.capture(payloads=True) as log:
        async with stream as s:
            for i in range(words):
                await s.text(f"word{i} ")
    stored = await acme.tasks.get_message(tid, assistant.id)
    assert stored is not None and stored.text() == text, "the stream lost or doubled text"
    updates = log.by_name("update")
    text_bytes = len(text.encode())
    beyond = [u.bytes_sent - _new_text_bytes(u) for u in updates]
    return {"writes": len(updates), "round_trips": log.round_trips, "bytes_sent": log.bytes_sent,
            "ratio_to_text": round(log.bytes_sent / text_bytes, 2),
            "max_bytes_beyond_the_new_text_per_write": max(beyond),
            "largest_write_bytes": max(u.bytes_sent for u in updates)}  # fmt: skip


async def run(results: dict[str, Any]) -> None:
    store = await mindstore.connect("embedded")
    # the same streams on a store with a keyring (issue 33): each chunk pushed sealed
    sealed = await mindstore.connect("embedded", keyring=Keyring(LocalMasterKey(os.urandom(32))))
    try:
        rows = []
        for name, words, flush_bytes in CASES:
            text_bytes = len("".join(f"word{i} " for i in range(words)).encode())
            before = await _stream(store, words, flush_bytes, chunks=False)
            after = await _stream(store, words, flush_bytes, chunks=True)
            keyring_before = await _stream(sealed, words, flush_bytes, chunks=False)
            keyring_after = await _stream(sealed, words, flush_bytes, chunks=True)
            bound = TEXT_BOUND * text_bytes + PER_WRITE_BOUND * after["writes"]
            rows.append({"case": name, "deltas": words, "text_bytes": text_bytes, "flush_bytes": flush_bytes,
                         "before": before, "after": after, "bound_bytes": int(bound),
                         "keyring": {"whole_parts": keyring_before, "chunks": keyring_after,
                                     "chunks_vs_no_keyring": round(keyring_after["bytes_sent"]
                                                                   / after["bytes_sent"], 3)},
                         "within_goal": after["bytes_sent"] <= bound
                         and after["max_bytes_beyond_the_new_text_per_write"] <= PER_WRITE_BOUND
                         and keyring_after["bytes_sent"] <= bound
                         and keyring_after["max_bytes_beyond_the_new_text_per_write"]
                         <= PER_WRITE_BOUND})  # fmt: skip
        results["streaming"] = {"backend": "embedded", "text_bound": TEXT_BOUND,
                                "per_write_bound_bytes": PER_WRITE_BOUND, "cases": rows,
                                "within_goal": all(row["within_goal"] for row in rows),
                                "earlier": EARLIER}  # fmt: skip
    finally:
        await store.close()
        await sealed.close()


if __name__ == "__main__":
    out: dict[str, Any] = {}
    asyncio.run(run(out))
    print(json.dumps(out, indent=2))
