"""The example of each format in docs/formats.md is valid and round-trips as the doc says."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from mindstore import formats
from mindstore.model.header import TaskHeader
from mindstore.model.plans import plan_add_messages

DOC = Path(__file__).resolve().parent.parent / "docs" / "formats.md"
SECTIONS = {
    "OpenAI Chat Completions": (formats.from_openai_chat, formats.to_openai_chat),
    "OpenAI Responses": (formats.from_responses, formats.to_responses),
    "Anthropic Messages": (formats.from_anthropic, formats.to_anthropic),
    "Gemini": (formats.from_gemini, formats.to_gemini),
    "The message-layer format": (formats.from_message_layer, formats.to_message_layer),
    "The agent-graph format": (formats.from_agent_graph, formats.to_agent_graph),
}


def example(section: str) -> object:
    text = DOC.read_text(encoding="utf-8")
    body = text.split(f"\n## {section}\n", 1)[1]
    block = re.search(r"```python\n(.*?)```", body, re.S)
    assert block is not None, f"no example under {section!r}"
    return ast.literal_eval(block.group(1))


@pytest.mark.parametrize("section", SECTIONS)
def test_documented_example_round_trips(section: str) -> None:
    from_x, to_x = SECTIONS[section]
    payload = example(section)
    messages = from_x(payload)
    assert to_x(messages) == payload
    header = plan_add_messages(TaskHeader(), "doc-example", messages).header
    calls = [p for m in messages for p in m.content if p.type == "toolCall"]
    assert calls, "every example shows a tool call"
    assert header.open_tool_calls == []
