"""The Markdown table of a benchmark run (results/latest.md)."""

from __future__ import annotations

import json
from typing import Any

COLUMNS = (
    ("ms_per_append", "ms/append"),
    ("bytes_sent_per_append", "bytes sent/append"),
    ("write_bytes_sent_per_append", "write bytes/append"),
    ("round_trips_per_append", "round trips/append"),
    ("bytes_stored", "bytes stored"),
    ("read_last_50_bytes", "bytes read (last 50)"),
)


def _append_tables(compare: dict[str, Any]) -> list[str]:
    lines = [f"## Appending to a conversation ({compare['backend']} backend)", ""]
    for size, block in compare["sizes"].items():
        mind = block["rows"]["mindstore"]
        lines += [f"### {int(size):,} messages (last {block['window']} appends measured)", "",
                  "| store | " + " | ".join(title for _, title in COLUMNS) + " |",
                  "|---" * (len(COLUMNS) + 1) + "|"]  # fmt: skip
        for name, row in block["rows"].items():
            cells = []
            for key, _ in COLUMNS:
                value = row.get(key)
                ratio = block["ratios_to_mindstore"].get(name, {}).get(key)
                text = "-" if value is None else f"{value:,}"
                if ratio is not None:
                    text += f" ({ratio}x)"
                cells.append(text)
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines += ["", f"mindstore: message BSON {mind['message_bson']:,} B; the update sends "
                  f"{block['mindstore_write_overhead_bytes']:,} B more (limit 512); with the header "
                  f"read, {block['mindstore_total_overhead_bytes']:,} B more.", ""]  # fmt: skip
    lines += ["Notes:", *[f"- {note}" for note in compare.get("notes", [])], ""]
    return lines


def markdown(document: dict[str, Any]) -> str:
    results = document["results"]
    lines = ["# mindstore benchmarks", "",
             f"Run {document['created']} (Python {document['python']}, {document['machine']}"
             f"{', quick sizes' if document['quick'] else ''}). Reproduce: `scripts/bench`"
             " (add `--quick` for smaller sizes). Ratios are peer / mindstore, measured in the same run.", ""]  # fmt: skip
    if "append_compare" in results:
        lines += _append_tables(results["append_compare"])
    for key, value in results.items():
        if key == "append_compare":
            continue
        lines += [f"## {key}", "", "```json", json.dumps(value, indent=2), "```", ""]
    if document["failures"]:
        lines += ["## Failed modules", ""] + [f"- {k}: {v}" for k, v in document["failures"].items()] + [""]
    return "\n".join(lines)
