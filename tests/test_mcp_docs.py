"""The example of docs/mcp.md runs as it is and its assertions hold."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parent.parent / "docs" / "mcp.md"


def test_the_example_runs() -> None:
    pytest.importorskip("mcp")
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 1, "one runnable example in docs/mcp.md"
    exec(compile(blocks[0], "docs/mcp.md", "exec"), {"__name__": "__main__"})
