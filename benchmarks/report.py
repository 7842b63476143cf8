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


def _overhead_table(compare: dict[str, Any]) -> list[str]:
    """mindstore's bytes per append beyond the message itself, at every size."""
    limit = compare.get("overhead_limit_bytes", 512)
    lines = [f"### mindstore: bytes sent per append beyond the message's own BSON (limit {limit} B)", "",
             "| stored messages | message BSON (mean) | warm: mean / max | cold (read + update): mean / max "
             "| round trips warm / cold | within limit: warm mean / max, cold mean / max |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for size, block in compare["sizes"].items():
        mind, over = block["rows"]["mindstore"], block["mindstore_overhead_bytes"]
        ok = block["mindstore_within_limit"]
        verdict = ", ".join("yes" if ok[k] else "**no**" for k in ("warm_mean", "warm_max", "cold_mean", "cold_max"))
        lines.append(f"| {block['stored_before_window']:,} (+{block['window']}) | {mind['message_bson']:,} "
                     f"| {over['warm_mean']:,} / {over['warm_max']:,} | {over['total_mean']:,} / "
                     f"{over['total_max']:,} | {mind['round_trips_per_append']} / "
                     f"{mind['cold_round_trips_per_append']} | {verdict} |")  # fmt: skip
    last = list(compare["sizes"].values())[-1]["rows"]["mindstore"]
    worst = last.get("largest_overhead_append")
    if worst:
        lines += ["", f"Where the bytes go (largest size): a warm append is one guarded update; a cold "
                  f"one first reads the task header ({last['header_read_bytes_per_append']:,} B sent). "
                  f"The largest warm overhead ({worst['overhead']:,} B) is the {worst['role']} message, whose "
                  f"update also sets {', '.join(worst['header_fields_set'])} and carries the "
                  "`_id`/`tenant`/`version`/`updated_at`/`messages.id $ne` guard and the command envelope."]  # fmt: skip
    return lines + [""]


def _append_tables(compare: dict[str, Any]) -> list[str]:
    lines = [f"## Appending to a conversation ({compare['backend']} backend)", ""]
    lines += _overhead_table(compare)
    for size, block in compare["sizes"].items():
        lines += [f"### {int(size):,} messages ({block['stored_before_window']:,} stored, then "
                  f"{block['window']} appends measured)", "",
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
        lines.append("")
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
