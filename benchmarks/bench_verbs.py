"""What every verb costs on the wire: round trips and bytes beyond the message, warm and cold.

One scripted session runs every verb that appends messages and every verb that changes
the last message, on a realistic conversation (`conversation.with_probe(100)`: about 90
stored messages with tool calls and a finished sub-task), twice:

* warm: the store wrote the task last, so its header (and the last message as it stored
  it) is cached and a verb plans without reading;
* cold: a store with `header_cache_size=0` runs the same script on a copy of the task, so
  every verb reads first.

For each verb: round trips, bytes sent, and bytes *beyond the message*:

* an append verb: bytes sent minus the stored BSON of the messages it appended (what
  `bench_append_compare` calls overhead), against the 512 B limit;
* a verb on the last message: bytes sent minus the BSON of the values it sets inside the
  message (the new part, the patched text, the usage fields): what the guard, the header
  and the envelope cost.

Then one assistant turn written two ways: streamed (`add_human_message`, `tasks.stream`
with N deltas of reasoning and text, `add_tool_call_part`, `finish_assistant_message`,
`answer_tool_call`) and with `add_message` (the user message, the finished assistant
message, the tool result): round trips and bytes sent, for the answer streamed word by
word and four characters at a time. Deltas are written by size (`flush_bytes`), never by
time, so the figures do not depend on the machine's speed.

`EARLIER` holds the figures of issue 20 and this module's own figures on the code before
the header cache kept the last message and the stored header became compact.
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
"""Issue 20: a warm append sends at most its message's own BSON + this (the max over verbs)."""
HISTORY = 100

Action = Callable[[Any, str, dict[str, Any]], Awaitable[Any]]


@dataclass
class Step:
    name: str
    kind: str  # "append" | "part"
    action: Action
    prepare: Action | None = None
    """Reads the step needs (ids of stored messages), run before it is measured."""


def _text(start: int, stop: int) -> str:
    return " ".join(WORDS[start:stop])


def _call(call_id: str, name: str = "search") -> ToolCallPart:
    return ToolCallPart(
        tool_call_id=call_id, tool_name=name, args={"query": "probe", "limit": 5}, is_loading=False
    )


def _hits() -> dict[str, Any]:
    return {"hits": [{"title": w, "snippet": _text(0, 20)} for w in WORDS[:3]]}


def _assistant(call_id: str) -> AssistantMessage:
    parts = [ReasoningPart(reasoning="thinking about the next search"), TextPart(text=_text(5, 45))]
    return AssistantMessage(
        content=[*parts, _call(call_id)],
        status="completed",
        tokens_in=1500,
        tokens_out=300,
        cost=0.002,
    )


async def _keep(ctx: dict[str, Any], key: str, result: Awaitable[Any]) -> Any:
    ctx[key] = await result
    return ctx[key]


async def _compressed(tasks: Any, task_id: str, ctx: dict[str, Any]) -> None:
    head = await tasks.messages(task_id, 1, 4)
    ctx["compressed"], ctx["kept"] = [m.id for m in head[:3]], [head[3].id]


def _late_result() -> ToolMessage:
    part = ToolResultPart(tool_call_id="none", tool_name="search", result="late")
    return ToolMessage(content=[part])


def script() -> list[Step]:
    """Every append verb and every verb on the last message, in an order an agent could take."""
    user = UserMessage(content=[TextPart(text="probe: " + _text(0, 20))])
    return [
        Step("add_task_config", "append", lambda t, i, c: t.add_task_config(i, CONFIG)),
        Step("add_human_message", "append",
             lambda t, i, c: t.add_human_message(i, "probe: " + _text(0, 20))),
        Step("add_system_message", "append",
             lambda t, i, c: t.add_system_message(i, "Answer briefly.")),
        Step("add_assistant_message", "append",
             lambda t, i, c: _keep(c, "a", t.add_assistant_message(i))),
        Step("add_reasoning_part", "part",
             lambda t, i, c: t.add_reasoning_part(i, c["a"].id, "thinking")),
        Step("add_text_part", "part",
             lambda t, i, c: t.add_text_part(i, c["a"].id, _text(5, 45))),
        Step("add_tool_call_part", "part",
             lambda t, i, c: t.add_tool_call_part(i, c["a"].id, _call("v1"))),
        Step("finish_assistant_message", "part",
             lambda t, i, c: t.finish_assistant_message(
                 i, c["a"].id, tokens_in=1500, tokens_out=300, cost=0.002)),
        Step("answer_tool_call", "append",
             lambda t, i, c: t.answer_tool_call(i, "v1", _hits())),
        Step("add_message (user)", "append",
             lambda t, i, c: t.add_message(i, user.model_copy(deep=True))),
        Step("add_message (assistant: reasoning, text, tool call, usage)", "append",
             lambda t, i, c: t.add_message(i, _assistant("v2"))),
        Step("add_tool_result_message", "append",
             lambda t, i, c: t.add_tool_result_message(i, "v2", "search", _hits())),
        Step("add_message (tool result)", "append",
             lambda t, i, c: t.add_message(i, _late_result())),
        Step("add_informational_message", "append",
             lambda t, i, c: t.add_informational_message(i, "progress", "searching the web")),
        Step("add_messages (user, assistant)", "append",
             lambda t, i, c: t.add_messages(
                 i, [UserMessage(content=[TextPart(text="two at once")]), _assistant("v3")])),
        Step("add_tool_result_message (closes v3)", "append",
             lambda t, i, c: t.add_tool_result_message(i, "v3", "search", _hits())),
        Step("add_assistant_message (delegating)", "append",
             lambda t, i, c: _keep(c, "d", t.add_assistant_message(i))),
        Step("add_tool_call_part (delegate)", "part",
             lambda t, i, c: t.add_tool_call_part(i, c["d"].id, _call("v4", "delegate"))),
        Step("add_task_entry", "append",
             lambda t, i, c: t.add_task_entry(
                 i, [TextPart(text="find three hotels in Lisbon")], SUB_CONFIG)),
        Step("add_human_message (in the sub-task)", "append",
             lambda t, i, c: t.add_human_message(i, "go on")),
        Step("add_message (assistant in the sub-task)", "append",
             lambda t, i, c: t.add_message(i, _assistant("v5"))),
        Step("answer_tool_call (in the sub-task)", "append",
             lambda t, i, c: t.answer_tool_call(i, "v5", _hits())),
        Step("add_task_exit", "append",
             lambda t, i, c: t.add_task_exit(i, [TextPart(text="three hotels found")])),
        Step("add_compression_message (4 ids)", "append",
             lambda t, i, c: t.add_compression_message(
                 i, 1, 4, "token budget", ["drop_tool_results"], c["compressed"], c["kept"]),
             prepare=_compressed),
        Step("add_assistant_message (again)", "append",
             lambda t, i, c: _keep(c, "e", t.add_assistant_message(i))),
        Step("add_text_part (again)", "part",
             lambda t, i, c: t.add_text_part(i, c["e"].id, _text(0, 10))),
        Step("finish_assistant_message (again)", "part",
             lambda t, i, c: t.finish_assistant_message(
                 i, c["e"].id, tokens_in=900, tokens_out=120, cost=0.001)),
        Step("redact (last message)", "part",
             lambda t, i, c: t.redact(i, c["e"].id, "privacy")),
    ]  # fmt: skip


BEFORE: dict[str, tuple[int, int, int, int]] = {
    "add_task_config": (1, 576, 2, 1018),
    "add_human_message": (1, 418, 2, 860),
    "add_system_message": (1, 491, 2, 933),
    "add_assistant_message": (1, 423, 2, 865),
    "add_reasoning_part": (2, 809, 2, 809),
    "add_text_part": (2, 809, 2, 809),
    "add_tool_call_part": (2, 961, 2, 961),
    "finish_assistant_message": (2, 975, 2, 975),
    "answer_tool_call": (1, 545, 2, 987),
    "add_message (user)": (1, 418, 2, 860),
    "add_message (assistant: reasoning, text, tool call, usage)": (1, 658, 2, 1100),
    "add_tool_result_message": (1, 511, 2, 953),
    "add_message (tool result)": (1, 398, 2, 840),
    "add_informational_message": (1, 498, 2, 940),
    "add_messages (user, assistant)": (1, 654, 2, 1096),
    "add_tool_result_message (closes v3)": (1, 511, 2, 953),
    "add_assistant_message (delegating)": (1, 423, 2, 865),
    "add_tool_call_part (delegate)": (2, 928, 2, 928),
    "add_task_entry": (1, 981, 2, 1423),
    "add_human_message (in the sub-task)": (1, 453, 2, 895),
    "add_message (assistant in the sub-task)": (1, 776, 2, 1197),
    "answer_tool_call (in the sub-task)": (1, 687, 2, 1129),
    "add_task_exit": (1, 595, 2, 1037),
    "add_compression_message (4 ids)": (2, 839, 3, 1281),
    "add_assistant_message (again)": (1, 424, 2, 866),
    "add_text_part (again)": (2, 811, 2, 811),
    "finish_assistant_message (again)": (2, 981, 2, 981),
    "redact (last message)": (2, 856, 2, 856),
}
"""This module on the code before (commit 298983c): round trips and bytes beyond the message,
warm then cold, per verb."""

EARLIER: dict[str, Any] = {
    "issue_20": {
        "streamed_turn": {"round_trips": 12, "bytes_sent": 7_400},
        "add_message_turn": {"round_trips": 4, "bytes_sent": 4_100},
        "warm_append_beyond": {"mean": 467, "max": 587, "round_trips": 1},
        "cold_append_beyond": {"min": 880, "max": 1_001, "round_trips": 2},
        "part_verbs": "each part verb read the header and the last message again",
    },
    "issue_30": {
        "commit": "e69988b",
        "add_task_entry_warm": {"beyond": 582, "round_trips": 1},
        "add_task_entry_cold": {"beyond": 1093, "round_trips": 2},
        "append_warm": {"max_beyond": 582, "mean_beyond": 411, "max_round_trips": 1},
        "note": "this module on the code of e69988b, run on the same machine as this branch's "
        "figures (benchmarks/results/latest.md at e69988b says 578 B, the issue 580 B)",
    },
    "this_module_before": {
        "commit": "298983c",
        "append_warm": {"max_beyond": 981, "max_beyond_verb": "add_task_entry",
                        "max_round_trips": 2, "mean_beyond": 564},
        "append_cold": {"max_beyond": 1423, "max_round_trips": 3, "mean_beyond": 1005},
        "part_warm": {"max_beyond": 981, "max_round_trips": 2, "mean_beyond": 891},
        "turn_words": {"deltas": 35, "streamed": {"round_trips": 10, "bytes_sent": 7075},
                       "add_message": {"round_trips": 3, "bytes_sent": 3798}},
    },
}  # fmt: skip


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
        appended = (await _raw_messages(store, key))[len(before) :]
        appended_bytes = sum(bson_size(m) for m in appended)
        payload = appended_bytes if step.kind == "append" else _set_values(log)
        rows.append({
            "verb": step.name, "kind": step.kind, "round_trips": log.round_trips,
            "commands": log.names(), "bytes_sent": log.bytes_sent, "payload_bytes": payload,
            "appended": len(appended), "beyond": log.bytes_sent - payload,
        })  # fmt: skip
    return rows


async def _task(tasks: Any) -> tuple[str, str]:
    prefix, _probe = with_probe(HISTORY)
    copies = [m.model_copy(deep=True) for m in prefix]
    task_id = (await tasks.create(messages=copies, replay=True)).id
    await tasks.add_human_message(task_id, "warm up")  # this store wrote the task last
    return task_id, f"bench/{task_id}"


def _summary(rows: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    chosen = [r for r in rows if r["kind"] == kind]
    worst = max(chosen, key=lambda r: r["beyond"])
    over = [r["verb"] for r in chosen if r["beyond"] > LIMIT]
    return {
        "max_beyond": worst["beyond"],
        "max_beyond_verb": worst["verb"],
        "max_round_trips": max(r["round_trips"] for r in chosen),
        "mean_beyond": round(sum(r["beyond"] for r in chosen) / len(chosen)),
        "within_limit": not over,
        "over_limit": over,
    }


async def _turn(store: Any, split: int, flush_bytes: int) -> dict[str, Any]:
    """One assistant turn streamed in deltas of `split` characters (0: word by word), and
    the same turn with add_message."""
    recorder = store.backend.recorder
    tasks = store.scoped("bench").tasks
    _prefix, probe = with_probe(HISTORY)
    user, assistant, tool = (m.model_copy(deep=True) for m in probe[:3])
    task_id, _ = await _task(tasks)
    with recorder.capture() as plain:
        for message in (user, assistant, tool):
            await tasks.add_message(task_id, message.model_copy(deep=True))
    reasoning = next(p for p in assistant.content if isinstance(p, ReasoningPart)).reasoning
    text = next(p for p in assistant.content if isinstance(p, TextPart)).text
    call = next(p for p in assistant.content if isinstance(p, ToolCallPart))
    result = next(p for p in tool.content if isinstance(p, ToolResultPart)).result

    def pieces(value: str) -> list[str]:
        if not split:
            return [word + " " for word in value.split()]
        return [value[i : i + split] for i in range(0, len(value), split)]

    deltas = [("reasoning", p) for p in pieces(reasoning)] + [("text", p) for p in pieces(text)]
    task_id, _ = await _task(tasks)
    with recorder.capture() as streamed:
        human = user.content[0]
        assert isinstance(human, TextPart)
        await tasks.add_human_message(task_id, human.text)
        async with tasks.stream(task_id, flush_ms=3_600_000, flush_bytes=flush_bytes) as stream:
            for kind, piece in deltas:
                await (stream.reasoning(piece) if kind == "reasoning" else stream.text(piece))
        writes, message_id = stream.writes, stream.message_id
        assert message_id is not None
        await tasks.add_tool_call_part(task_id, message_id, call.model_copy(deep=True))
        await tasks.finish_assistant_message(
            task_id, message_id, tokens_in=1500, tokens_out=300, cost=0.002
        )
        await tasks.answer_tool_call(task_id, call.tool_call_id, result)
    return {
        "deltas": len(deltas),
        "delta": "a word" if not split else f"{split} characters",
        "flush_bytes": flush_bytes,
        "stream_writes": writes,
        "streamed": {"round_trips": streamed.round_trips, "bytes_sent": streamed.bytes_sent,
                     "commands": sorted(set(streamed.names()))},
        "add_message": {"round_trips": plain.round_trips, "bytes_sent": plain.bytes_sent,
                        "commands": sorted(set(plain.names()))},
    }  # fmt: skip


async def run(results: dict[str, Any]) -> None:
    uri = os.environ.get("MINDSTORE_URI")
    named = os.environ.get("MINDSTORE_BENCH_DATABASE")
    database = named or f"bench_{uuid.uuid4().hex[:8]}"
    store = await mindstore.connect(uri or "embedded", database=database)
    try:
        warm_tasks = store.scoped("bench").tasks
        task_id, key = await _task(warm_tasks)
        warm = await _run_script(store, warm_tasks, task_id, key)
        cold_tasks = mindstore.Store(store.backend, header_cache_size=0).scoped("bench").tasks
        cold_id, cold_key = await _task(cold_tasks)
        cold = await _run_script(store, cold_tasks, cold_id, cold_key)
        verbs = []
        for w, c in zip(warm, cold, strict=True):
            before = BEFORE.get(w["verb"])
            verbs.append({
                "verb": w["verb"], "kind": w["kind"], "appended": w["appended"],
                "payload_bytes": w["payload_bytes"],
                "warm": {k: w[k] for k in ("round_trips", "bytes_sent", "beyond", "commands")},
                "cold": {k: c[k] for k in ("round_trips", "bytes_sent", "beyond", "commands")},
                "before": None if before is None else {
                    "warm_round_trips": before[0], "warm_beyond": before[1],
                    "cold_round_trips": before[2], "cold_beyond": before[3]},
            })  # fmt: skip
        results["verbs"] = {
            "backend": "mongodb" if uri else "embedded",
            "database_name_chars": len(database),
            "limit_bytes": LIMIT,
            "history_messages": HISTORY,
            "verbs": verbs,
            "summary": {
                "append_warm": _summary(warm, "append"),
                "append_cold": _summary(cold, "append"),
                "part_warm": _summary(warm, "part"),
                "part_cold": _summary(cold, "part"),
            },
            "turns": [await _turn(store, 0, 1024), await _turn(store, 4, 64)],
            "earlier": EARLIER,
            "notes": [
                "beyond = bytes sent minus the stored BSON of the appended messages (append "
                "verbs), or minus the BSON of the values set inside the message (verbs on the "
                "last message)",
                "warm: the store wrote the task last; cold: header_cache_size=0, the same "
                "script on a copy of the task (one read of the header and the last message)",
                f"the command envelope holds the database name: {len(database)} characters here",
                "add_messages grows by one array key and one guarded id per message; a "
                "compression message by its referenced ids (the filter requires them, $all)",
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
