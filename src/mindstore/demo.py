"""End-to-end demo: one agent conversation with a nested sub-task, stored and read back.

Runs on the embedded backend by default, or on the server named by `MINDSTORE_URI`
(`python -m mindstore.demo`, or `scripts/demo`). Every step is a public API call.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

from rich.console import Console
from rich.table import Table

import mindstore
from mindstore.model.parts import (
    InformationalPart,
    TaskConfigPart,
    TextPart,
    ToolCallPart,
    ToolMetadata,
    ToolResultPart,
)

ROOT_CONFIG = TaskConfigPart(
    model_name="openai/gpt-4o",
    tool_metadata=[
        ToolMetadata(
            name="web_search",
            description="Search the web",
            parameters={
                "$schema": "http://json-schema.org/draft-07/schema#",
                "type": "object",
                "properties": {"q": {"type": "string"}},
            },
        ),
        ToolMetadata(
            name="research", description="Delegate a research sub-task", is_task_entry=True
        ),
    ],
)
SUB_CONFIG = TaskConfigPart(
    model_name="anthropic/claude-sonnet-4",
    tool_metadata=[
        ToolMetadata(name="web_search"),
        ToolMetadata(name="research", is_task_entry=True),
    ],
)


async def scenario(console: Console) -> dict[str, object]:
    uri = os.environ.get("MINDSTORE_URI") or "memory:"  # in memory on purpose: no warning
    store = await mindstore.connect(uri)
    console.print(f"[bold]backend:[/] {store.kind}")
    try:
        acme = store.scoped("acme")
        task = await acme.tasks.create(owner="alice", title="Trip to Lisbon", config=ROOT_CONFIG)
        tid = task.id
        await acme.tasks.add_human_message(tid, "Find me a hotel in Lisbon for next weekend.")

        reply = await acme.tasks.add_assistant_message(tid)
        await acme.tasks.add_reasoning_part(tid, reply.id, "I should search first.", "sig-1")
        await acme.tasks.add_tool_call_part(
            tid,
            reply.id,
            ToolCallPart(
                tool_call_id="call-search",
                tool_name="web_search",
                args={"q": "Lisbon hotels next weekend"},
            ),
        )
        await acme.tasks.finish_assistant_message(
            tid, reply.id, tokens_in=412, tokens_out=38, cost=0.0031
        )
        await acme.tasks.answer_tool_call(
            tid, "call-search", {"results": ["Hotel Avenida", "Casa do Rio"]}
        )

        planner = await acme.tasks.add_assistant_message(tid)
        await acme.tasks.add_tool_call_part(
            tid,
            planner.id,
            ToolCallPart(
                tool_call_id="call-research",
                tool_name="research",
                args={"topic": "compare the two hotels"},
            ),
        )
        await acme.tasks.finish_assistant_message(
            tid, planner.id, tokens_in=530, tokens_out=22, cost=0.0035
        )

        await acme.tasks.add_task_entry(
            tid,
            [
                TextPart(text="Compare Hotel Avenida and Casa do Rio on price and reviews."),
                InformationalPart(
                    informational_type="context",
                    details="budget: 150 EUR/night",
                    is_visible_ai=True,
                ),
            ],
            SUB_CONFIG,
        )
        level = await acme.tasks.current_task_level(tid)
        worker = await acme.tasks.add_assistant_message(tid)
        await acme.tasks.add_text_part(tid, worker.id, "Casa do Rio: 132 EUR, 4.6 stars. ")
        await acme.tasks.add_text_part(tid, worker.id, "Avenida: 171 EUR, 4.4 stars.")
        await acme.tasks.finish_assistant_message(
            tid, worker.id, tokens_in=800, tokens_out=64, cost=0.0049
        )
        sub_messages = await acme.tasks.current_task_messages(tid)
        _exit, answer = await acme.tasks.add_task_exit(
            tid, [TextPart(text="Casa do Rio is cheaper and better rated.")]
        )

        final = await acme.tasks.add_assistant_message(tid)
        await acme.tasks.add_text_part(tid, final.id, "I recommend Casa do Rio (132 EUR/night).")
        await acme.tasks.finish_assistant_message(
            tid, final.id, tokens_in=700, tokens_out=30, cost=0.004
        )
        await acme.tasks.set_state(tid, mindstore.TaskState.completed)

        record = await acme.tasks.get(tid)
        messages = await acme.tasks.messages(tid)
        spans = await acme.tasks.sub_task_spans(tid)

        table = Table(title=f"task {tid} — {record.title}")
        for column in ("#", "role", "depth", "scope", "content"):
            table.add_column(column)
        for index, message in enumerate(messages):
            summary = message.text() or ", ".join(
                getattr(part, "type", "?") for part in getattr(message, "content", [])
            )
            table.add_row(
                str(index),
                str(message.role),
                str(message.depth),
                (message.scope or "")[:8],
                summary[:70],
            )
        console.print(table)
        console.print(f"level inside the sub-task: {level}; messages it saw: {len(sub_messages)}")
        shapes = [(s.entry_index, s.exit_index, s.depth, s.message_count) for s in spans]
        console.print(f"sub-task spans: {shapes}")
        results = (
            [p.result for p in answer.content if isinstance(p, ToolResultPart)] if answer else []
        )
        console.print(
            f"tool answer written by the exit: {json.dumps(results[0] if results else None)}"
        )
        console.print(
            f"state: {record.state}; seq: {record.seq}; version: {record.version}; "
            f"size: {record.size_bytes} bytes; usage: {record.usage.model_dump()}"
        )

        # analytics over this run's sessions (message timestamps are whole epoch seconds)
        since = int(record.created_at.timestamp())
        usage = await acme.analytics.usage(group_by=("model",), since=since)
        tools = await acme.analytics.tools(since=since)
        report = Table(title="analytics: usage by model, tool calls")
        for column in ("model / tool", "turns / calls", "tokens in", "tokens out", "cost / errors"):
            report.add_column(column)
        for row in usage:
            report.add_row(
                str(row.model),
                str(row.messages),
                str(row.tokens_in),
                str(row.tokens_out),
                f"${row.cost:.4f}",
            )
        for tool in tools:
            report.add_row(str(tool.tool), str(tool.calls), "", "", f"{tool.errors} errors")
        console.print(report)
        return {
            "task_id": tid,
            "messages": len(messages),
            "state": record.state,
            "spans": len(spans),
            "cost": record.usage.cost,
            "cost_by_model": {row.model: row.cost for row in usage},
            "tool_calls": {tool.tool: tool.calls for tool in tools},
        }
    finally:
        await store.close()


def main() -> int:
    console = Console()
    try:
        summary = asyncio.run(scenario(console))
    except mindstore.MindstoreError as exc:
        console.print(f"[red]error:[/] {exc}")
        return exc.exit_code
    console.print(f"[green]demo finished[/]: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
