"""Model context windows: what `tasks.context(max_tokens=32_000)` reads, next to reading
the whole level, on 5,000- and 20,000-message conversations; and what streaming writes.

The conversation is `conversation.with_probe(size)` (user turns, assistant turns with
reasoning, tool calls and results, a sub-task every eight turns, ending at the root)
with a system prompt after its task config. For each size:

* `whole_level`: `tasks.current_task_messages()` (what building a window from the whole
  level costs in reads);
* `read_only`: `context(max_tokens=32_000, auto_compress=False)`;
* `auto_compress`: the default call on a level with compression enabled and past its
  `token_limit` (200,000): the first call compresses (a full read, one write), the next
  ones reuse the recorded outcome; `first`, then `next` (the same figures every time).

Bytes and round trips come from the command recorder (the same on a real server), with
`window_bytes` the stored size of the messages the window holds and `received_per_window_byte`
their ratio (the bound: about 2, plus the header). Beside them, `before` and `earlier`: the
same calls on the code before (quoted, see `BEFORE`), and `goal`: issue 30's bound (at most
3 round trips and 1.5x the window received) and whether this run meets it. Streaming: a 2,000-word answer streamed
a word at a time (`flush_bytes=256`): writes, bytes per write, and the largest write beyond
the part's own text.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

import mindstore
from benchmarks.conversation import CONFIG, with_probe
from mindstore.model.messages import AnyMessage, SystemMessage, message_to_dict
from mindstore.model.parts import CompressionConfig, TextPart
from mindstore.model.storage_form import bson_size

BUDGET = 32_000
BEFORE = {
    "5000": {"read_only": (6, 223_623, 10_157, 200_761), "first": (11, 1_911_104, 379_894, 226_651),
             "next": (7, 212_287, 121_322, 226_651)},
    "20000": {"read_only": (6, 235_320, 10_157, 200_202), "first": (11, 7_014_304, 1_494_400, 224_328),
              "next": (7, 393_020, 464_073, 224_328)},
}  # fmt: skip
"""The same calls before the paged window read became one pipeline (issue 30 item 1): this
benchmark run on commit 42bbbee's sources (the checkpoint, the counts and the slices read
per segment, the checkpoint's id lists sent with each), in the same session as the run
after (round trips, bytes received, bytes sent, window bytes). Quoted, not re-measured:
the old read path is gone."""
EARLIER = {
    "5000": {"read_only": (8, 224_505, 13_225, 200_761), "first": (13, 1_911_986, 382_962, 226_651),
             "next": (12, 581_721, 212_909, 226_651)},
    "20000": {"read_only": (8, 236_202, 13_225, 200_178), "first": (13, 7_015_186, 1_497_468, 224_328),
              "next": (13, 1_886_658, 927_559, 224_328)},
}  # fmt: skip
"""Before the per-segment read was batched: commit dab2d1e's sources (issue 30's figures)."""
GOAL = {"round_trips": 3, "received_per_window_byte": 1.5}
"""Issue 30 item 1: a window in at most 3 round trips, receiving at most 1.5x its bytes,
with or without a checkpoint (the read-only call and the next calls after a round)."""
SYSTEM = "You are a careful research agent: cite sources, keep answers short. " * 6


def _conversation(size: int) -> list[AnyMessage]:
    prefix, probe = with_probe(size)
    messages = [*prefix, *probe]
    config = messages[0]
    config.content = [CONFIG.model_copy(update={"compression_config": CompressionConfig(token_limit=200_000)})]
    messages.insert(1, SystemMessage(content=[TextPart(text=SYSTEM)], started_ts=messages[0].started_ts))
    for message in messages:
        message.task_id = ""
    return messages


async def _measure(store: Any, call: Any) -> tuple[Any, dict[str, Any]]:
    with store.backend.recorder.capture() as log:
        start = time.perf_counter()
        result = await call()
        elapsed = time.perf_counter() - start
    return result, {"round_trips": log.round_trips, "bytes_sent": log.bytes_sent,
                    "bytes_received": log.bytes_received, "writes": len(log.by_name("update")),
                    "ms_embedded": round(elapsed * 1000, 1)}  # fmt: skip


def _quoted(table: dict[str, Any], size: int) -> dict[str, Any]:
    names = ("round_trips", "bytes_received", "bytes_sent", "window_bytes")
    return {name: dict(zip(names, row, strict=True)) for name, row in table.get(str(size), {}).items()}


def _window_row(window: Any, figures: dict[str, Any]) -> dict[str, Any]:
    window_bytes = sum(bson_size(message_to_dict(m)) for m in window)
    return {**figures, "messages": len(window), "tokens": window.tokens, "window_bytes": window_bytes,
            "received_per_window_byte": round(figures["bytes_received"] / max(window_bytes, 1), 2),
            "compressed_now": window.compressed_now}  # fmt: skip


async def _sizes(store: Any, sizes: tuple[int, ...]) -> dict[str, Any]:
    acme = store.scoped("bench")
    out: dict[str, Any] = {}
    for size in sizes:
        tid = (await acme.tasks.create(owner="agent", messages=_conversation(size), replay=True)).id
        header = await acme.tasks.header(tid)
        level, whole = await _measure(store, lambda: acme.tasks.current_task_messages(tid))
        window, read_only = await _measure(store, lambda: acme.tasks.context(tid, max_tokens=BUDGET, auto_compress=False))
        first_window, first = await _measure(store, lambda: acme.tasks.context(tid, max_tokens=BUDGET))
        next_window, after = await _measure(store, lambda: acme.tasks.context(tid, max_tokens=BUDGET))
        out[str(size)] = {
            "stored_messages": header.seq,
            "stored_bytes": header.size_bytes,
            "level_messages": len(level),
            "whole_level": {**whole, "level_bytes": sum(bson_size(message_to_dict(m)) for m in level)},
            "read_only": _window_row(window, read_only),
            "auto_compress": {"first": _window_row(first_window, first), "next": _window_row(next_window, after),
                              "notes": next_window.notes},  # fmt: skip
            "before": _quoted(BEFORE, size),
            "earlier": _quoted(EARLIER, size),
            "goal": {**GOAL, "met": all(row["round_trips"] <= GOAL["round_trips"]
                                        and row["received_per_window_byte"] <= GOAL["received_per_window_byte"]
                                        for row in (_window_row(window, read_only), _window_row(next_window, after)))},
            "read_only_vs_whole_level_bytes": round(whole["bytes_received"] / max(read_only["bytes_received"], 1), 1),
        }
    return out


def _texts(value: Any) -> str:
    """The text a write carries, wherever its update holds it (`$set` of the part so far,
    or streamed chunks pushed): every `text` string and every string set on a content path."""
    if isinstance(value, dict):
        return "".join(
            child if isinstance(child, str) and (key == "text" or ".content." in key) else _texts(child)
            for key, child in value.items()
        )
    if isinstance(value, list):
        return "".join(_texts(child) for child in value)
    return ""


async def _streaming(store: Any, words: int = 2_000) -> dict[str, Any]:
    acme = store.scoped("bench-stream")
    tid = (await acme.tasks.create(config=CONFIG)).id
    await acme.tasks.add_human_message(tid, "write me an essay")
    assistant = await acme.tasks.add_assistant_message(tid)
    with store.backend.recorder.capture(payloads=True) as log:  # the updates themselves
        async with acme.tasks.stream(tid, assistant.id, flush_bytes=256, flush_ms=3_600_000) as stream:
            for i in range(words):
                await stream.text(f"word{i} ")
    updates = log.by_name("update")
    text_bytes = len("".join(f"word{i} " for i in range(words)).encode())
    beyond = []
    for update in updates:
        beyond.append(update.bytes_sent - len(_texts(update.update).encode()))
    return {"deltas": words, "text_bytes": text_bytes, "writes": len(updates), "round_trips": log.round_trips,
            "bytes_sent": log.bytes_sent, "max_bytes_beyond_the_text_per_write": max(beyond),
            "flush_bytes": 256}  # fmt: skip


async def run(results: dict[str, Any], *, sizes: tuple[int, ...] = (5_000, 20_000)) -> None:
    store = await mindstore.connect("embedded")
    try:
        results["context"] = {"backend": "embedded", "max_tokens": BUDGET, "sizes": await _sizes(store, sizes),
                              "streaming": await _streaming(store)}  # fmt: skip
    finally:
        await store.close()


if __name__ == "__main__":
    out: dict[str, Any] = {}
    asyncio.run(run(out, sizes=(5_000,) if "--quick" in sys.argv else (5_000, 20_000)))
    print(json.dumps(out, indent=2))
