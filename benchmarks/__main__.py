"""Run every benchmarks/bench_*.py, write results/latest.json and results/latest.md.

    python -m benchmarks                 # everything, full sizes
    python -m benchmarks --quick         # smaller sizes where a module supports them
    python -m benchmarks --only dialogs  # modules whose name contains the word

A failing module is reported and the run goes on; the exit code is 1 if any failed.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import json
import platform
import sys
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from benchmarks.report import markdown

HERE = Path(__file__).parent
QUICK_ARGS: dict[str, dict[str, Any]] = {
    "bench_analytics": {"quick": True},
    "bench_append_compare": {"sizes": (10, 100, 1_000)},
    "bench_backup": {"messages": 10_000},
    "bench_console": {"sizes": (1_000, 10_000)},
    "bench_context": {"sizes": (5_000,)},
    "bench_dialogs": {"sizes": (10, 1_000)},
    "bench_encryption": {"turns": 20, "appends": 50},
    "bench_search": {"messages": 10_000, "queries": 30},
    "bench_langgraph_storage": {"turns": 20},
    "bench_model": {},
    "bench_paging": {"sizes": (100, 1_000, 10_000), "big_messages": 10_000},
    "bench_recall": {"quick": True},
    "bench_storage": {"turns": 20},
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("--quick", action="store_true", help="smaller sizes (minutes, not tens of minutes)")
    parser.add_argument("--only", action="append", default=[], help="run modules whose name contains this")
    parser.add_argument("--out", type=Path, default=HERE / "results", help="where latest.json/md go")
    args = parser.parse_args(argv)

    names = sorted(p.stem for p in HERE.glob("bench_*.py"))
    if args.only:
        names = [n for n in names if any(word in n for word in args.only)]
    results: dict[str, Any] = {}
    failures: dict[str, str] = {}
    timings: dict[str, float] = {}
    for name in names:
        print(f"mindstore bench: {name} ...", file=sys.stderr, flush=True)
        start = time.perf_counter()
        try:
            module = importlib.import_module(f"benchmarks.{name}")
            kwargs = QUICK_ARGS.get(name, {}) if args.quick else {}
            accepted = inspect.signature(module.run).parameters
            asyncio.run(module.run(results, **{k: v for k, v in kwargs.items() if k in accepted}))
        except Exception:  # noqa: BLE001 - report and go on with the other modules
            failures[name] = traceback.format_exc()
            print(f"mindstore bench: {name} FAILED\n{failures[name]}", file=sys.stderr, flush=True)
        timings[name] = round(time.perf_counter() - start, 1)
        print(f"mindstore bench: {name} took {timings[name]} s", file=sys.stderr, flush=True)

    document = {
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "quick": args.quick,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "module_seconds": timings,
        "failures": {k: v.splitlines()[-1] for k, v in failures.items()},
        "results": results,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "latest.json").write_text(json.dumps(document, indent=2) + "\n")
    (args.out / "latest.md").write_text(markdown(document))
    print(f"mindstore bench: wrote {args.out / 'latest.json'} and latest.md", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
