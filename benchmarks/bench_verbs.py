"""What every verb costs on the wire: round trips and bytes beyond the message, warm and cold.

One scripted session runs every verb that appends messages and every verb that changes
the tail message, on a realistic conversation (`conversation.with_probe(100)`: about 90
stored messages with tool calls and a finished sub-task), twice:

* warm: the store wrote the task last, so its header (and the tail message it last wrote)
  is cached and a verb plans without reading;
* cold: a store with `header_cache_size=0` runs the same script on a copy of the task, so
  every verb reads first.

For each verb: round trips, bytes sent, and bytes *beyond the message*:

* an append verb: bytes sent minus the stored BSON of the messages it appended (what
  `bench_append_compare` calls overhead), against the 512 B limit;
* a part verb: bytes sent minus the BSON of the values it sets inside the message (the new
  part, the patched text, the usage fields), i.e. what the guard, the header and the
  envelope cost.

Then one assistant turn written two ways: streamed (`add_human_message`, `tasks.stream`
with N deltas of reasoning and text, `add_tool_call_part`, `finish_assistant_message`,
`answer_tool_call`) and with `add_message` (the user message, the finished assistant
message, the tool result): round trips and bytes sent. Deltas are written by size
(`flush_bytes`), never by time, so the figures do not depend on the machine's speed.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import mindstore
from benchmarks.conversation import CONFIG, SUB_CONFIG, WORDS, with_probe
from mindstore.model.messages import AssistantMessage, ToolMessage, UserMessage
from mindstore.model.parts import ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from mindstore.model.storage_form import bson_size, value_size

LIMIT = 512
"""Issue 20: a warm append sends at most the message's own BSON + this (the max over verbs)."""
HISTORY = 100

EARLIER = {
    "source": "issue 20, measured before this module existed",
    "streamed_turn": {"round_trips": 12, "bytes_sent": 7_400},
    "add_message_turn": {"round_trips": 4, "bytes_sent": 4_100},
    "warm_append_overhead": {"mean": 467, "max": 587, "round_trips": 1},
    "cold_append_overhead": {"min": 880, "max": 1_001, "round_trips": 2},
    "part_verb_round_trips_warm": 2,
}


@dataclass
class Step:
    name: str
    kind: str  # "append" | "part"
    action: Callable[[Any, str, dict[str, Any]], Awaitable[Any]]
    prepare: Callable[[Any, str, dict[str, Any]], Awaitable[Any]] | None = None
    """Reads the step needs (ids of stored messages), run before it is measured."""


def _text(start: int, stop: int) -> str:
    return " ".join(WORDS[start:stop])


def _call(call_id: str, name: str = "search") -> ToolCallPart:
    return ToolCallPart(tool_call_id=call_id, tool_name=name, args={"query": "probe", "limit": 5},
                        is_loading=False)  # fmt: skip


def _hits() -> dict[str, Any]:
    return {"hits": [{"title": w, "snippet": _text(0, 20)} for w in WORDS[:3]]}


def _assistant(call_id: str) -> AssistantMessage:
    return AssistantMessage(
        content=[ReasoningPart(reasoning="thinking about the next search"), TextPart(text=_text(5, 45)),
                 _call(call_id)],
        status="completed", tokens_in=1500, tokens_out=300, cost=0.002,
    )  # fmt: skip


async def _remember(ctx: dict[str, Any], key: str, result: Awaitable[Any]) -> Any:
    value = await result
    ctx[key] = value
    return value


def script() -> list[Step]:
    """Every append verb and every tail part verb, in an order a real agent could take."""
    return [
        Step("add_task_config", "append", lambda t, i, c: t.add_task_config(i, CONFIG)),
        Step(
            "add_human_message",
            "append",
            lambda t, i, c: t.add_human_message(i, "probe: " + _text(0, 20)),
        ),
        Step(
            "add_system_message",
            "append",
            lambda t, i, c: t.add_system_message(i, "Answer briefly."),
        ),
        Step(
            "add_assistant_message",
            "append",
            lambda t, i, c: _remember(c, "a", t.add_assistant_message(i)),
        ),
        Step(
            "add_reasoning_part",
            "part",
            lambda t, i, c: t.add_reasoning_part(i, c["a"].id, "thinking"),
        ),
        Step("add_text_part", "part", lambda t, i, c: t.add_text_part(i, c["a"].id, _text(5, 45))),
        Step(
            "add_tool_call_part",
            "part",
            lambda t, i, c: t.add_tool_call_part(i, c["a"].id, _call("v1")),
        ),
        Step(
            "finish_assistant_message",
            "part",
            lambda t, i, c: t.finish_assistant_message(
                i, c["a"].id, tokens_in=1500, tokens_out=300, cost=0.002
            ),
        ),
        Step("answer_tool_call", "append", lambda t, i, c: t.answer_tool_call(i, "v1", _hits())),
        Step(
            "add_message (user)",
            "append",
            lambda t, i, c: t.add_message(
                i, UserMessage(content=[TextPart(text="probe: " + _text(0, 20))])
            ),
        ),
        Step(
            "add_message (assistant: reasoning, text, tool call, usage)",
            "append",
            lambda t, i, c: t.add_message(i, _assistant("v2")),
        ),
        Step(
            "add_tool_result_message",
            "append",
            lambda t, i, c: t.add_tool_result_message(i, "v2", "search", _hits()),
        ),
        Step(
            "add_message (tool result)",
            "append",
            lambda t, i, c: t.add_message(
                i,
                ToolMessage(
                    content=[ToolResultPart(tool_call_id="none", tool_name="search", result="late")]
                ),
            ),
        ),
        Step(
            "add_informational_message",
            "append",
            lambda t, i, c: t.add_informational_message(i, "progress", "searching the web"),
        ),
        Step(
            "add_messages (user, assistant)",
            "append",
            lambda t, i, c: t.add_messages(
                i, [UserMessage(content=[TextPart(text="two at once")]), _assistant("v3")]
            ),
        ),
        Step(
            "add_tool_result_message (closes v3)",
            "append",
            lambda t, i, c: t.add_tool_result_message(i, "v3", "search", _hits()),
        ),
        Step(
            "add_assistant_message (delegating)",
            "append",
            lambda t, i, c: _remember(c, "d", t.add_assistant_message(i)),
        ),
        Step(
            "add_tool_call_part (delegate)",
            "part",
            lambda t, i, c: t.add_tool_call_part(i, c["d"].id, _call("v4", "delegate")),
        ),
        Step(
            "add_task_entry",
            "append",
            lambda t, i, c: t.add_task_entry(
                i, [TextPart(text="find three hotels in Lisbon")], SUB_CONFIG
            ),
        ),
        Step(
            "add_human_message (in the sub-task)",
            "append",
            lambda t, i, c: t.add_human_message(i, "go on"),
        ),
        Step(
            "add_message (assistant in the sub-task)",
            "append",
            lambda t, i, c: t.add_message(i, _assistant("v5")),
        ),
        Step(
            "answer_tool_call (in the sub-task)",
            "append",
            lambda t, i, c: t.answer_tool_call(i, "v5", _hits()),
        ),
        Step(
            "add_task_exit",
            "append",
            lambda t, i, c: t.add_task_exit(i, [TextPart(text="three hotels found")]),
        ),
        Step(
            "add_compression_message",
            "append",
            lambda t, i, c: t.add_compression_message(
                i, 1, 4, "token budget", ["drop_tool_results"], c["compressed"], c["kept"]
            ),
            prepare=_compressed,
        ),
        Step(
            "add_assistant_message (again)",
            "append",
            lambda t, i, c: _remember(c, "e", t.add_assistant_message(i)),
        ),
        Step(
            "add_text_part (again)",
            "part",
            lambda t, i, c: t.add_text_part(i, c["e"].id, _text(0, 10)),
        ),
        Step(
            "finish_assistant_message (usage object)",
            "part",
            lambda t, i, c: t.finish_assistant_message(
                i, c["e"].id, tokens_in=900, tokens_out=120, cost=0.001
            ),
        ),
        Step("redact (tail)", "part", lambda t, i, c: t.redact(i, c["e"].id, "privacy")),
    ]


async def _compressed(tasks: Any, task_id: str, ctx: dict[str, Any]) -> None:
    head = await tasks.messages(task_id, 1, 4)
    ctx["compressed"], ctx["kept"] = [m.id for m in head[:3]], [head[3].id]


async def _raw_messages(store: Any, key: str) -> list[dict[str, Any]]:
    document = await store.database["tasks"].find_one({"_id": key}, {"messages": 1})
    return list(document["messages"])


def _set_values(log: Any) -> int:
    """BSON of the values an update sets inside existing messages (`messages.<i>.<path>`)."""
    total = 0
    for command in log.by_name("update"):
        for key, value in (command.update or {}).get("$set", {}).items():
            if key.startswith("messages.") and key.count(".") >= 2:
                total += value_size(value)
    return total


async def _run_script(store: Any, tasks: Any, task_id: str, key: str) -> list[dict[str, Any]]:
    recorder = store.backend.recorder
    ctx: dict[str, Any] = {}
    rows = []
    for step in script():
        if step.prepare is not None:
            await step.prepare(tasks, task_id, ctx)
        before = await _raw_messages(store, key)
        with recorder.capture(payloads=True) as log:
            await step.action(tasks, task_id, ctx)
        after = await _raw_messages(store, key)
        appended = after[len(before) :]
        sent = log.bytes_sent
        if step.kind == "append":
            payload = sum(bson_size(m) for m in appended)
        else:
            payload = _set_values(log)
        rows.append({"verb": step.name, "kind": step.kind, "round_trips": log.round_trips,
                     "commands": log.names(), "bytes_sent": sent, "payload_bytes": payload,
                     "appended": len(appended), "beyond": sent - payload})  # fmt: skip
    return rows


async def _task(store: Any, tasks: Any) -> tuple[str, str]:
    prefix, _probe = with_probe(HISTORY)
    task_id = (
        await tasks.create(messages=[m.model_copy(deep=True) for m in prefix], replay=True)
    ).id
    await tasks.add_human_message(task_id, "warm up")  # this store wrote the task last
    return task_id, f"bench/{task_id}"


def _summary(rows: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    chosen = [r for r in rows if r["kind"] == kind]
    worst = max(chosen, key=lambda r: r["beyond"])
    return {"max_beyond": worst["beyond"], "max_beyond_verb": worst["verb"],
            "max_round_trips": max(r["round_trips"] for r in chosen),
            "mean_beyond": round(sum(r["beyond"] for r in chosen) / len(chosen)),
            "within_limit": worst["beyond"] <= LIMIT}  # fmt: skip


async def _turns(store: Any, deltas_per_word: int = 1) -> dict[str, Any]:
    """One assistant turn streamed, and the same turn with add_message."""
    recorder = store.backend.recorder
    tasks = store.scoped("bench").tasks
    _prefix, probe = with_probe(HISTORY)
    user, assistant, tool = (m.model_copy(deep=True) for m in probe[:3])
    task_id, _ = await _task(store, tasks)
    with recorder.capture() as plain:
        for message in (user, assistant, tool):
            await tasks.add_message(task_id, message.model_copy(deep=True))
    reasoning = next(p for p in assistant.content if isinstance(p, ReasoningPart)).reasoning
    text = next(p for p in assistant.content if isinstance(p, TextPart)).text
    call = next(p for p in assistant.content if isinstance(p, ToolCallPart))
    result = next(p for p in tool.content if isinstance(p, ToolResultPart)).result
    pieces = [("reasoning", w + " ") for w in reasoning.split()] + [
        ("text", w + " ") for w in text.split()
    ]
    task_id, _ = await _task(store, tasks)
    with recorder.capture() as streamed:
        await tasks.add_human_message(task_id, user.content[0].text)
        async with tasks.stream(task_id, flush_ms=3_600_000) as stream:
            for kind, piece in pieces:
                await (stream.reasoning(piece) if kind == "reasoning" else stream.text(piece))
            writes = stream.writes
            message_id = stream.message_id
        await tasks.add_tool_call_part(task_id, message_id, call.model_copy(deep=True))
        await tasks.finish_assistant_message(
            task_id, message_id, tokens_in=1500, tokens_out=300, cost=0.002
        )
        await tasks.answer_tool_call(task_id, call.tool_call_id, result)
    return {
        "deltas": len(pieces),
        "flush_bytes": 1024,
        "stream_writes": writes,
        "streamed": {"round_trips": streamed.round_trips, "bytes_sent": streamed.bytes_sent,
                     "commands": streamed.names()},
        "add_message": {"round_trips": plain.round_trips, "bytes_sent": plain.bytes_sent,
                        "commands": plain.names()},
    }  # fmt: skip


async def run(results: dict[str, Any]) -> None:
    uri = os.environ.get("MINDSTORE_URI")
    named = os.environ.get("MINDSTORE_BENCH_DATABASE")
    store = await mindstore.connect(
        uri or "embedded", database=named or f"bench_{uuid.uuid4().hex[:8]}"
    )
    try:
        warm_tasks = store.scoped("bench").tasks
        task_id, key = await _task(store, warm_tasks)
        warm = await _run_script(store, warm_tasks, task_id, key)
        cold_tasks = mindstore.Store(store.backend, header_cache_size=0).scoped("bench").tasks
        cold_id, cold_key = await _task(store, cold_tasks)
        cold = await _run_script(store, cold_tasks, cold_id, cold_key)
        verbs = [{"verb": w["verb"], "kind": w["kind"], "appended": w["appended"], "payload_bytes": w["payload_bytes"],
                  "warm": {k: w[k] for k in ("round_trips", "bytes_sent", "beyond", "commands")},
                  "cold": {k: c[k] for k in ("round_trips", "bytes_sent", "beyond", "commands")}}
                 for w, c in zip(warm, cold, strict=True)]  # fmt: skip
        results["verbs"] = {
            "backend": "mongodb" if uri else "embedded",
            "limit_bytes": LIMIT,
            "history_messages": HISTORY,
            "verbs": verbs,
            "summary": {
                "append_warm": _summary(warm, "append"),
                "append_cold": _summary(cold, "append"),
                "part_warm": _summary(warm, "part"),
                "part_cold": _summary(cold, "part"),
            },
            "turn": await _turns(store),
            "earlier": EARLIER,
            "notes": [
                "beyond = bytes sent minus the stored BSON of the appended messages (append verbs) or "
                "minus the BSON of the values set inside the message (part verbs)",
                "warm: the store wrote the task last; cold: header_cache_size=0, the same script on a copy",
                "streamed turn: deltas written by size (flush_bytes), never by time",
            ],
        }
    finally:
        if uri and not named:
            await store.backend.client.drop_database(store.database.name)
        await store.close()


if __name__ == "__main__":
    out: dict[str, Any] = {}
    asyncio.run(run(out))
    json.dump(out, sys.stdout, indent=2)
