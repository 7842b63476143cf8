"""Two revisions of mindstore side by side in one run: what a change did to the wire figures.

This tree's `bench_verbs` (every append verb and every verb on the last message, warm and
cold) and `bench_context` (`tasks.context` on a 5,000-message conversation: read-only,
the call that compresses, the calls after it; a streamed answer) run twice, each in a
process of its own: once on this tree's `src/`, once on a base revision's `src/`
(`git archive`, `MINDSTORE_BENCH_BASE`, default `BASE`). The benchmark code is the same
for both, so only the library differs. Every figure named like a byte count or a round
trip count is compared; the result lists each that moved, with both values.

Bytes and round trips are what hold on any backend (times here are the embedded
backend's and are not compared).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BASE = "22035a0"
"""The last commit before transient errors became `Unavailable` with retries, and before
the indexes the index audit asked for (docs/operations.md)."""
MODULES = ("bench_verbs", "bench_context")
WIRE_WORDS = ("bytes", "round_trips", "rt", "commands", "writes", "reads")
"""A figure is compared when one of these is a word of its key."""

MEASURE = """
import asyncio, json, sys
import mindstore
from benchmarks import bench_context, bench_verbs
results = {"mindstore": mindstore.__file__}
asyncio.run(bench_verbs.run(results))
asyncio.run(bench_context.run(results, sizes=(5_000,)))
json.dump(results, sys.stdout)
"""


def _base_tree(revision: str, folder: Path) -> Path:
    """`revision`'s `src/` extracted under `folder`."""
    archive = folder / "base.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "-o", str(archive), revision, "src"],
                   check=True)  # fmt: skip
    with tarfile.open(archive) as tar:
        tar.extractall(folder / "base", filter="data")
    return folder / "base" / "src"


def _measure(src: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{ROOT}"}
    env.pop("MINDSTORE_PAGE_MESSAGES", None)  # the default page size, for both
    done = subprocess.run([sys.executable, "-c", MEASURE], env=env, cwd=ROOT, check=True,
                          capture_output=True, text=True)  # fmt: skip
    measured: dict[str, Any] = json.loads(done.stdout)
    if not str(measured["mindstore"]).startswith(str(src)):
        raise RuntimeError(f"measured {measured['mindstore']}, not the tree at {src}")
    return measured


def _figures(value: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, float]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _figures(item, (*path, str(key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            label = item.get("verb") or item.get("name") if isinstance(item, dict) else None
            yield from _figures(item, (*path, str(label or index)))
    elif isinstance(value, (int, float)) and not isinstance(value, bool) and path:
        words = set(path[-1].replace("-", "_").split("_"))
        if words & set(WIRE_WORDS) or path[-1] in WIRE_WORDS:
            yield "/".join(path), float(value)


def compare(base: dict[str, Any], head: dict[str, Any]) -> dict[str, Any]:
    """Each wire figure of `head` beside `base`'s: those that moved, and a count of the
    rest (pure: the two runs' results in, the comparison out)."""
    before, after = dict(_figures(base)), dict(_figures(head))
    common = sorted(set(before) & set(after))
    moved = {key: {"base": before[key], "head": after[key],
                   "ratio": round(after[key] / before[key], 4) if before[key] else None}
             for key in common if before[key] != after[key]}  # fmt: skip
    return {"compared": len(common), "unchanged": len(common) - len(moved), "moved": moved,
            "only_in_base": sorted(set(before) - set(after)),
            "only_in_head": sorted(set(after) - set(before))}  # fmt: skip


async def run(results: dict[str, Any]) -> None:
    revision = os.environ.get("MINDSTORE_BENCH_BASE", BASE)
    with tempfile.TemporaryDirectory() as folder:
        base_src = await asyncio.to_thread(_base_tree, revision, Path(folder))
        base = await asyncio.to_thread(_measure, base_src)
        head = await asyncio.to_thread(_measure, ROOT / "src")
    results["revisions"] = {"base": revision, "modules": list(MODULES), **compare(base, head)}


if __name__ == "__main__":
    out: dict[str, Any] = {}
    asyncio.run(run(out))
    print(json.dumps(out, indent=2))
