"""The README's demo scenario runs end to end and stores what it says it stores."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from mindstore.demo import scenario


async def test_demo_scenario_runs_end_to_end(monkeypatch):
    monkeypatch.delenv("MINDSTORE_URI", raising=False)
    output = io.StringIO()
    summary = await scenario(Console(file=output, width=160))
    assert summary["messages"] == 13
    assert summary["state"] == "completed"
    assert summary["spans"] == 1
    assert abs(summary["cost"] - 0.0155) < 1e-9
    assert summary["cost_by_model"] == pytest.approx(
        {"openai/gpt-4o": 0.0106, "anthropic/claude-sonnet-4": 0.0049}
    )
    assert summary["tool_calls"] == {"research": 1, "web_search": 1}
    text = output.getvalue()
    assert "taskexit" in text and "Casa do Rio is cheaper" in text
