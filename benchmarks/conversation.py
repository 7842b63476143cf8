"""A realistic agent conversation of any length, built with the in-memory `Task` verbs:
user turns, assistant turns with usage, tool calls and results, and a nested sub-task
every eight turns (entry, work inside it, exit answering the delegating call).

`with_probe(size)` gives the measured workload: a prefix of about `size - 9` messages
ending on a turn boundary, then three identical *probe turns* (user message; assistant
message with reasoning, text, a search call and usage; the tool result). Every size
appends the same probe messages, so a figure that changes with `size` changes because of
the history, not because a different kind of message happened to be measured.
"""

from __future__ import annotations

import random
from typing import Any

from mindstore.model.messages import AnyMessage
from mindstore.model.parts import TaskConfigPart, TextPart, ToolCallPart, ToolMetadata
from mindstore.model.task import Task

CONFIG = TaskConfigPart(
    model_name="openai/gpt-4o",
    tool_metadata=[ToolMetadata(name="search"), ToolMetadata(name="delegate", is_task_entry=True)],
)
SUB_CONFIG = TaskConfigPart(model_name="openai/gpt-4o-mini", tool_metadata=[ToolMetadata(name="search")])


PROBE_TURNS = 3
PROBE_MESSAGES = 3 * PROBE_TURNS


def conversation(count: int, seed: int = 7) -> list[AnyMessage]:
    return _build(seed, until=count)[0].messages[:count]


def with_probe(size: int, seed: int = 7, turns: int = PROBE_TURNS) -> tuple[list[AnyMessage], list[AnyMessage]]:
    """(prefix, probe): `prefix` ends on a turn boundary outside any sub-task, with no
    tool call open, so the probe turns meet the same header state at every size;
    len(prefix) + len(probe) <= size."""
    room = size - 3 * turns
    if room < 1:
        raise ValueError(f"size {size} leaves no room for the config message and {turns} probe turns")
    boundaries = _build(seed, until=room + 1)[1]
    kept = max(i for i, (length, clean) in enumerate(boundaries) if length <= room and clean)
    task = _build(seed, turns=kept)[0]
    prefix = list(task.messages)
    for i in range(turns):
        _probe_turn(task, i)
    return prefix, task.messages[len(prefix):]


def _probe_turn(task: Task, i: int) -> None:
    task.add_human_message("probe: " + " ".join(WORDS[:20]))
    assistant = task.add_assistant_message()
    task.add_reasoning_part(assistant.id, "thinking about the next search")
    task.add_text_part(assistant.id, " ".join(WORDS[5:45]))
    call = ToolCallPart(tool_call_id=f"probe{i}", tool_name="search", args={"query": "probe", "limit": 5},
                        is_loading=False)  # fmt: skip
    task.add_tool_call_part(assistant.id, call)
    task.finish_assistant_message(assistant.id, tokens_in=1500, tokens_out=300, cost=0.002)
    task.answer_tool_call(call.tool_call_id, {"hits": [{"title": w, "snippet": " ".join(WORDS[:20])} for w in WORDS[:3]]})


def _build(seed: int, *, until: int | None = None, turns: int | None = None) -> tuple[Task, list[tuple[int, bool]]]:
    """The conversation after `turns` turns, or once it holds at least `until` messages.

    Also returns `boundaries`: `boundaries[k]` is (message count, outside any sub-task with no
    open call) after k turns (k = 0: the config message only).
    """
    rng = random.Random(seed)
    task = Task(id="bench")
    task.add_task_config(CONFIG)
    boundaries = [(len(task.messages), True)]
    turn = 0
    while (turns is None or turn < turns) and (until is None or len(task.messages) < until):
        turn += 1
        task.add_human_message(f"turn {turn}: " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 30))))
        assistant = task.add_assistant_message()
        task.add_reasoning_part(assistant.id, "thinking about " + rng.choice(WORDS))
        task.add_text_part(assistant.id, " ".join(rng.choice(WORDS) for _ in range(rng.randint(10, 60))))
        delegate = turn % 8 == 0 and not task.header.scope_stack
        call = ToolCallPart(tool_call_id=f"call{turn}", tool_name="delegate" if delegate else "search",
                            args={"query": rng.choice(WORDS), "limit": 5}, is_loading=False)  # fmt: skip
        task.add_tool_call_part(assistant.id, call)
        task.finish_assistant_message(assistant.id, tokens_in=rng.randint(200, 4000),
                                      tokens_out=rng.randint(20, 600), cost=0.002)  # fmt: skip
        if delegate:
            task.add_task_entry([TextPart(text=f"sub-task {turn}")], SUB_CONFIG)
        elif task.header.scope_stack and turn % 8 == 3:
            task.answer_tool_call(call.tool_call_id, {"hits": []})  # every call gets its answer
            task.add_task_exit([TextPart(text=f"finished sub-task before turn {turn}")])
        else:
            result: dict[str, Any] = {"hits": [{"title": rng.choice(WORDS), "snippet": " ".join(
                rng.choice(WORDS) for _ in range(20))} for _ in range(3)]}  # fmt: skip
            task.answer_tool_call(call.tool_call_id, result)
        boundaries.append((len(task.messages), not task.header.scope_stack and not task.header.open_tool_calls))
    return task, boundaries


WORDS = ("lisbon hotel price flight search result agent context window token budget summary "
         "tool call argument answer question user assistant planner memory store mongo index "
         "shard tenant owner message part reasoning stream delta cost usage latency").split()
