"""The README's demo scenario runs end to end and stores what it says it stores."""

from __future__ import annotations

import io

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
    text = output.getvalue()
    assert "taskexit" in text and "Casa do Rio is cheaper" in text
