"""One conversation as one export line, in a chosen format (pure: no I/O).

A line is a JSON object: the conversation's header (`task`: id, owner, title, state,
times, usage, metadata) and its messages in the format asked for:

* ``jsonl``: every message as mindstore stores it (`messages`: the typed model's JSON, by
  alias), which reads back with `mindstore.model.messages.MESSAGE_ADAPTER` unchanged;
* ``mind-map``: the conversation as the Mind Map format's task (`task_document`: id,
  state, content, messages), which `mindstore.Task.model_validate` reads back;
* ``openai-chat``, ``openai-responses``, ``anthropic``, ``gemini``: the provider's payload
  (`payload`, from `mindstore.formats`), which holds what a model is sent and keeps what it
  does not say in each format's own metadata key; what a provider payload has no place
  for (each message's id, role, start and finish times, usage and error) travels beside
  it, one entry per message (`messages`), so nothing the store holds about a turn is lost
  on the way out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import Any

from mindstore.formats import to_anthropic, to_gemini, to_openai_chat, to_responses
from mindstore.model.header import TaskState
from mindstore.model.messages import MESSAGE_LIST_ADAPTER, AnyMessage
from mindstore.model.task import Task
from mindstore.protocols import TaskRecord

__all__ = ["ExportFormat", "conversation_line", "message_facts"]

JSON = dict[str, Any]


class ExportFormat(StrEnum):
    """The formats `mindstore export` writes (docs/import-export.md)."""

    jsonl = "jsonl"
    mind_map = "mind-map"
    openai_chat = "openai-chat"
    openai_responses = "openai-responses"
    anthropic = "anthropic"
    gemini = "gemini"


_PROVIDERS: dict[ExportFormat, Callable[[Sequence[AnyMessage]], Any]] = {
    ExportFormat.openai_chat: to_openai_chat,
    ExportFormat.openai_responses: to_responses,
    ExportFormat.anthropic: to_anthropic,
    ExportFormat.gemini: to_gemini,
}


def header(record: TaskRecord) -> JSON:
    """The conversation's header as JSON (times in ISO 8601, UTC)."""
    return record.model_dump(mode="json")


def message_facts(messages: Sequence[AnyMessage]) -> list[JSON]:
    """What a provider payload has no place for: each message's id, role, times, usage, error."""
    dumped = MESSAGE_LIST_ADAPTER.dump_python(list(messages), mode="json", by_alias=True)
    keep = ("id", "role", "started_ts", "finished_ts", "usage", "error_message")
    return [{key: d[key] for key in keep if d.get(key) is not None} for d in dumped]


def conversation_line(
    record: TaskRecord, messages: Sequence[AnyMessage], fmt: ExportFormat
) -> JSON:
    """The export line of one conversation (see the module docstring)."""
    line: JSON = {"format": fmt.value, "task": header(record)}
    if fmt is ExportFormat.jsonl:
        line["messages"] = MESSAGE_LIST_ADAPTER.dump_python(
            list(messages), mode="json", by_alias=True
        )
    elif fmt is ExportFormat.mind_map:
        task = Task(id=record.id, state=TaskState(record.state), messages=list(messages))
        line["task_document"] = task.model_dump(mode="json", by_alias=True)
    else:
        line["payload"] = _PROVIDERS[fmt](messages)
        line["messages"] = message_facts(messages)
    return line
