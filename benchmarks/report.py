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


def _context_tables(context: dict[str, Any]) -> list[str]:
    """`tasks.context(max_tokens=...)` next to reading the whole level, per size."""
    lines = [f"## Model context windows, max_tokens={context['max_tokens']:,} ({context['backend']} backend)", "",
             "| stored messages (level) | read | round trips | bytes received | bytes sent | window messages / tokens "
             "| window bytes | received per window byte | writes |",
             "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for size, block in context["sizes"].items():
        label = f"{block['stored_messages']:,} ({block['level_messages']:,})"
        whole = block["whole_level"]
        lines.append(f"| {label} | whole level | {whole['round_trips']} | {whole['bytes_received']:,} | "
                     f"{whole['bytes_sent']:,} | {block['level_messages']:,} / - | {whole['level_bytes']:,} | - | 0 |")
        rows = (("context, auto_compress=False", block["read_only"]),
                ("context, first call (compresses)", block["auto_compress"]["first"]),
                ("context, next calls", block["auto_compress"]["next"]))
        for name, row in rows:
            lines.append(f"| {label} | {name} | {row['round_trips']} | {row['bytes_received']:,} | "
                         f"{row['bytes_sent']:,} | {row['messages']:,} / {row['tokens']:,} | {row['window_bytes']:,} | "
                         f"{row['received_per_window_byte']} | {row['writes']} |")
    stream = context.get("streaming")
    if stream:
        lines += ["", f"Streaming {stream['deltas']:,} deltas ({stream['text_bytes']:,} B of text, "
                  f"flush_bytes={stream['flush_bytes']}): {stream['writes']} writes, {stream['round_trips']} round "
                  f"trips, {stream['bytes_sent']:,} B sent; each write carries the part's text so far plus at most "
                  f"{stream['max_bytes_beyond_the_text_per_write']} B."]  # fmt: skip
    return lines + [""]


def _storage_table(storage: dict[str, Any]) -> list[str]:
    """Bytes stored for one conversation: each store, and mindstore's form before the lean one."""
    payload = storage["payload_json_bytes"]
    lines = [f"## Bytes stored for one conversation ({storage['turns']} turns, {storage['messages']} messages, "
             f"{payload:,} B of messages as JSON; {storage['backend']} backend)", "",
             "| store | bytes stored | / payload | before the lean form | / payload | reads back the same |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for name, row in storage["rows"].items():
        before = row.get("before")
        earlier = (
            f"{before['bytes_stored']:,} | {before['ratio_to_payload']}x" if before else "- | -"
        )
        lines.append(f"| {name} | {row['bytes_stored']:,} | {row['ratio_to_payload']}x | {earlier} "
                     f"| {'yes' if row.get('same_messages') else '**no**'} |")  # fmt: skip
    goal, saved = storage["meets_goal"], storage["left_out_bytes"]
    lines += ["", f"Goal: at most {storage['goal_ratio']}x the payload "
              f"({'met' if goal['at_most_goal_ratio'] else '**not met**'}) and below LangChain's history "
              f"({'met' if goal['below_langchain_history'] else '**not met**'}). The lean form leaves out "
              f"{saved['total']:,} B ({saved['share_of_before_message_bytes']:.0%} of the earlier message bytes): "
              f"null fields {saved['null']:,} B, fields at their default {saved['default']:,} B, "
              f"the per-message task id {saved['task_id']:,} B.", "",
              "Notes:", *[f"- {note}" for note in storage.get("notes", [])], ""]  # fmt: skip
    return lines


def markdown(document: dict[str, Any]) -> str:
    results = document["results"]
    lines = ["# mindstore benchmarks", "",
             f"Run {document['created']} (Python {document['python']}, {document['machine']}"
             f"{', quick sizes' if document['quick'] else ''}). Reproduce: `scripts/bench`"
             " (add `--quick` for smaller sizes). Ratios are peer / mindstore, measured in the same run.", ""]  # fmt: skip
    if "append_compare" in results:
        lines += _append_tables(results["append_compare"])
    if "context" in results:
        lines += _context_tables(results["context"])
    if "storage" in results:
        lines += _storage_table(results["storage"])
    for key, value in results.items():
        if key in ("append_compare", "context", "storage"):
            continue
        lines += [f"## {key}", "", "```json", json.dumps(value, indent=2), "```", ""]
    if document["failures"]:
        lines += ["## Failed modules", ""] + [f"- {k}: {v}" for k, v in document["failures"].items()] + [""]
    return "\n".join(lines)
