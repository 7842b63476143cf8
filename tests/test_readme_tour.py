"""The README's tour runs as written (its import paths and calls are public API)."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


async def test_the_readme_tour_runs_as_written() -> None:
    block = re.search(r"```python\n(.*?)```", README.read_text(), re.S)
    assert block is not None
    body = "\n".join("    " + line for line in block.group(1).splitlines())
    namespace: dict[str, object] = {}
    exec(
        compile(f"async def tour():\n{body}\n    return acme, task\n", str(README), "exec"),
        namespace,
    )
    acme, task = await namespace["tour"]()  # type: ignore[operator]
    record = await acme.tasks.get(task.id)
    assert record.seq > 5 and record.level == 0 and record.usage.cost > 0
    await acme.store.close()
