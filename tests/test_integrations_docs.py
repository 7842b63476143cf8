"""Every example in docs/integrations.md runs as it is and its assertions hold."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parent.parent / "docs" / "integrations.md"
SECTIONS = {"OpenAI Agents SDK": "agents", "LangGraph": "langgraph",
            "LangGraph store": "langgraph", "pydantic-ai": "pydantic_ai",
            "LangChain": "langchain_core", "LlamaIndex": "llama_index.core",
            "Microsoft Agent Framework": "agent_framework"}  # fmt: skip


def example(section: str) -> str:
    body = DOC.read_text(encoding="utf-8").split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", body, re.S)
    assert len(blocks) == 1, f"one runnable example under {section!r}"
    return blocks[0]


@pytest.mark.parametrize("section", SECTIONS)
def test_the_example_runs(section: str) -> None:
    pytest.importorskip(SECTIONS[section])
    code = compile(example(section), f"docs/integrations.md ({section})", "exec")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        exec(code, {"__name__": "__main__"})  # the documented example itself
