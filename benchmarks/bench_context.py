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
their ratio (the bound: about 2, plus the header). Streaming: a 2,000-word answer streamed
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
            "read_only_vs_whole_level_bytes": round(whole["bytes_received"] / max(read_only["bytes_received"], 1), 1),
        }
    return out


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
        sets = update.update["$set"]
        text = next((v if isinstance(v, str) else v.get("text", "")) for k, v in sets.items() if ".content." in k)
        beyond.append(update.bytes_sent - len(text.encode()))
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
