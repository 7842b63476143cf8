"""A realistic agent conversation of any length, built with the in-memory `Task` verbs:
user turns, assistant turns with usage, tool calls and results, and a nested sub-task
every 40 messages (entry, work inside it, exit answering the delegating call)."""

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


def conversation(count: int, seed: int = 7) -> list[AnyMessage]:
    rng = random.Random(seed)
    task = Task(id="bench")
    task.add_task_config(CONFIG)
    turn = 0
    while len(task.messages) < count:
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
    return task.messages[:count]


WORDS = ("lisbon hotel price flight search result agent context window token budget summary "
         "tool call argument answer question user assistant planner memory store mongo index "
         "shard tenant owner message part reasoning stream delta cost usage latency").split()
