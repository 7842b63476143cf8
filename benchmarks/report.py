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
                  f"trips, {stream['bytes_sent']:,} B sent; each write carries the text it writes (what arrived since the last one) plus at most "
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


def _verbs_tables(verbs: dict[str, Any]) -> list[str]:
    """Every verb's round trips and bytes beyond its message, warm and cold, beside the
    figures of the code before (bench_verbs)."""
    limit = verbs["limit_bytes"]
    lines = [f"## What each verb costs ({verbs['backend']} backend)", "",
             f"Bytes beyond the message: bytes sent minus the stored BSON of the appended messages (append "
             f"verbs) or of the values set inside the message (verbs on the last message); limit {limit} B "
             "for a warm append. Before: this module on the code before (commit "
             f"{verbs['earlier']['this_module_before']['commit']}).", "",
             "| verb | kind | message B | warm: round trips / beyond | cold: round trips / beyond "
             "| before, warm | before, cold |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    for row in verbs["verbs"]:
        warm, cold, before = row["warm"], row["cold"], row.get("before") or {}
        flag = " **over**" if row["kind"] == "append" and warm["beyond"] > limit else ""
        was = (f"{before['warm_round_trips']} / {before['warm_beyond']:,}", f"{before['cold_round_trips']} / "
               f"{before['cold_beyond']:,}") if before else ("-", "-")  # fmt: skip
        lines.append(f"| {row['verb']} | {row['kind']} | {row['payload_bytes']:,} | {warm['round_trips']} / "
                     f"{warm['beyond']:,}{flag} | {cold['round_trips']} / {cold['beyond']:,} | {was[0]} | {was[1]} |")  # fmt: skip
    summary, before = verbs["summary"], verbs["earlier"]["this_module_before"]
    issue = verbs["earlier"]["issue_20"]
    lines += ["", "| | max beyond (verb) | mean beyond | max round trips | before: max / mean / trips |",
              "|---|---|---|---|---|"]  # fmt: skip
    for key, title in (("append_warm", "appends, warm"), ("append_cold", "appends, cold"),
                       ("part_warm", "verbs on the last message, warm"),
                       ("part_cold", "verbs on the last message, cold")):  # fmt: skip
        row, was = summary[key], before.get(key)
        earlier = f"{was['max_beyond']:,} / {was['mean_beyond']:,} / {was['max_round_trips']}" if was else "-"
        lines.append(f"| {title} | {row['max_beyond']:,} ({row['max_beyond_verb']}) | {row['mean_beyond']:,} "
                     f"| {row['max_round_trips']} | {earlier} |")  # fmt: skip
    over = summary["append_warm"]["over_limit"]
    lines += ["", f"Warm appends over {limit} B: {', '.join(over) if over else 'none'}. Issue 20 measured a warm "
              f"append at {issue['warm_append_beyond']['mean']} B mean, {issue['warm_append_beyond']['max']} B max "
              f"(cold {issue['cold_append_beyond']['min']:,}-{issue['cold_append_beyond']['max']:,} B, 2 round trips), and "
              f"{issue['part_verbs']} (2 round trips).", "",
              "| one assistant turn | deltas | stream writes | streamed: round trips / bytes sent "
              "| add_message: round trips / bytes sent |", "|---|---|---|---|---|"]  # fmt: skip
    for turn in verbs["turns"]:
        streamed, plain = turn["streamed"], turn["add_message"]
        lines.append(f"| deltas of {turn['delta']}, flush_bytes={turn['flush_bytes']} | {turn['deltas']} | "
                     f"{turn['stream_writes']} | {streamed['round_trips']} / {streamed['bytes_sent']:,} | "
                     f"{plain['round_trips']} / {plain['bytes_sent']:,} |")  # fmt: skip
    words = before["turn_words"]
    lines += ["", f"Before, word by word: streamed {words['streamed']['round_trips']} round trips / "
              f"{words['streamed']['bytes_sent']:,} B, add_message {words['add_message']['round_trips']} / "
              f"{words['add_message']['bytes_sent']:,} B. Issue 20: a streamed turn "
              f"{issue['streamed_turn']['round_trips']} round trips / {issue['streamed_turn']['bytes_sent']:,} B "
              f"against {issue['add_message_turn']['round_trips']} / {issue['add_message_turn']['bytes_sent']:,} B "
              "with add_message.", "", "Notes:", *[f"- {note}" for note in verbs.get("notes", [])], ""]  # fmt: skip
    return lines


def _streaming_table(streaming: dict[str, Any]) -> list[str]:
    """A streamed answer's writes and bytes, before (whole text each write) and after
    (chunks), measured in the same run (bench_streaming)."""
    lines = [f"## What a streamed answer sends ({streaming['backend']} backend)", "",
             "Before: every write sends the part's whole text so far (the earlier form, same run); after: every "
             "write pushes only what arrived since the last one.", "",
             "| answer | text B | writes | before: bytes sent (x text) | after: bytes sent (x text) "
             "| after: max B beyond the new text, per write | issue 30 (code before) | |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    issue = streaming["earlier"]["issue_30"]
    for case in streaming["cases"]:
        before, after, was = case["before"], case["after"], issue.get(case["case"], {})
        lines.append(f"| {case['case']} | {case['text_bytes']:,} | {after['writes']} | {before['bytes_sent']:,} "
                     f"({before['ratio_to_text']}x) | {after['bytes_sent']:,} ({after['ratio_to_text']}x) "
                     f"| {after['max_bytes_beyond_the_new_text_per_write']} | {was.get('bytes_sent', 0):,} B "
                     f"| {_verdict(case['within_goal'])} |")  # fmt: skip
    return lines + [""]


def _get(tree: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(tree, dict) or key not in tree:
            return None
        tree = tree[key]
    return tree


def _verdict(ok: Any) -> str:
    return "-" if ok is None else ("met" if ok else "**not met**")


def _lean_goals(results: dict[str, Any]) -> list[str]:
    """Lean storage and faster reads: each goal, the earlier figure beside this run's."""
    rows: list[tuple[str, str, str, Any]] = []
    storage = results.get("storage")
    if storage:
        ours, peer = storage["rows"]["mindstore"], storage["rows"]["langchain_mongodb_history"]
        rows.append(("stored bytes, 80-turn conversation: <= 1.1x the payload, below LangChain's history",
                     f"{ours['before']['ratio_to_payload']}x (earlier form, same run); 1.49x measured in the issue",
                     f"{ours['ratio_to_payload']}x ({ours['bytes_stored']:,} B); LangChain {peer['ratio_to_payload']}x",
                     storage["meets_goal"]["at_most_goal_ratio"] and storage["meets_goal"]["below_langchain_history"]))  # fmt: skip
    verbs = results.get("verbs")
    if verbs:
        warm, before = verbs["summary"]["append_warm"], _get(verbs, "earlier", "this_module_before", "append_warm")
        rows.append(("every append verb, warm: <= message + 512 B (max), one round trip",
                     f"max {before['max_beyond']:,} B, {before['max_round_trips']} round trips" if before else "-",
                     f"max {warm['max_beyond']:,} B ({warm['max_beyond_verb']}), {warm['max_round_trips']} round trip(s)",
                     warm["max_beyond"] <= verbs["limit_bytes"] and warm["max_round_trips"] == 1))  # fmt: skip
        part, before = verbs["summary"]["part_warm"], _get(verbs, "earlier", "this_module_before", "part_warm")
        rows.append(("part verbs on the last message, warm: one round trip",
                     f"{before['max_round_trips']} round trips" if before else "-",
                     f"{part['max_round_trips']} round trip(s), max {part['max_beyond']:,} B beyond the values set",
                     part["max_round_trips"] == 1))  # fmt: skip
    entry = next((row for row in verbs["verbs"] if row["verb"] == "add_task_entry"), None) if verbs else None
    was = _get(verbs, "earlier", "issue_30")
    if entry and was:
        warm = entry["warm"]
        rows.append(("add_task_entry, warm: <= its messages + 512 B, one round trip",
                     f"{was['add_task_entry_warm']['beyond']:,} B, {was['add_task_entry_warm']['round_trips']} round "
                     f"trip (commit {was['commit']})",
                     f"{warm['beyond']:,} B, {warm['round_trips']} round trip(s)",
                     warm["beyond"] <= verbs["limit_bytes"] and warm["round_trips"] == 1))  # fmt: skip
    streaming = results.get("streaming")
    if streaming:
        for case in streaming["cases"]:
            before, after = case["before"], case["after"]
            rows.append((f"streamed answer, {case['case']}: <= {streaming['text_bound']}x its text + "
                         f"{streaming['per_write_bound_bytes']} B a write",
                         f"{before['bytes_sent']:,} B ({before['ratio_to_text']}x) in {before['writes']} writes "
                         "(whole text each write, same run)",
                         f"{after['bytes_sent']:,} B ({after['ratio_to_text']}x) in {after['writes']} writes; bound "
                         f"{case['bound_bytes']:,} B; at most {after['max_bytes_beyond_the_new_text_per_write']} B "
                         "a write beyond its new text", case["within_goal"]))  # fmt: skip
    read = _get(results, "model", "read")
    if read:
        conv = read["conversation"]
        rows.append(("10,000 realistic messages parsed and validated, collector on: median < 150 ms",
                     f"{conv['former_read']['median_ms']:,} ms (former path, same run)",
                     f"{conv['current_read']['median_ms']:,} ms (CPU {conv['current_read']['cpu_median_ms']:,} ms); "
                     f"without the collector pause {conv['current_read_without_collector_pause']['median_ms']:,} ms",
                     conv["within_target"]))  # fmt: skip
        e2e = read["tasks_messages_end_to_end"]

        def passes(counts: dict[str, float]) -> str:
            return (f"{counts['python_walks_per_message']:g} Python walks and "
                    f"{counts['validations_per_message']:g} validation per message")  # fmt: skip

        now = e2e["current_passes"]
        rows.append(("tasks.messages() of 10,000: one decode pass",
                     f"{passes(e2e['former_passes'])} (former path, same run)",
                     f"{passes(now)}; {e2e['current']['median_ms']:,} ms vs {e2e['former']['median_ms']:,} ms "
                     "end to end", now["python_walks_per_message"] == 0 and now["validations_per_message"] == 1))  # fmt: skip
    backup = results.get("backup")
    if backup and "restore_parses_per_record" in backup:
        rows.append(("restore decodes each record once", "2 (issue)",
                     f"{backup['restore_parses_per_record']} ({backup['restore_record_parses']:,} records)",
                     backup["restore_parses_per_record"] == 1))  # fmt: skip
    embedded = results.get("embedded")
    if embedded:
        (key,) = [k for k in embedded if k.startswith("ratio_")]
        ratio = embedded[key]
        rows.append(("embedded backend: append at 10,000 messages <= 5x an append at 100",
                     f"{ratio['old']}x (mongomock's update, same run)", f"{ratio['fast']}x",
                     embedded["within_goal"]))  # fmt: skip
    if not rows:
        return []
    lines = ["## Lean storage and faster reads: the goals", "",
             "| goal | earlier | this run | |", "|---|---|---|---|"]  # fmt: skip
    lines += [f"| {goal} | {earlier} | {now} | {_verdict(ok)} |" for goal, earlier, now, ok in rows]
    return lines + ["", "Details in the sections below.", ""]


def _mb(value: float) -> str:
    return f"{value / 1e6:,.1f} MB"


def _paging_sizes(paging: dict[str, Any]) -> list[str]:
    """One row per history length: appends, the seal, the reads, the stored layout."""
    lines = [
        "| messages in the task | bytes sent / append: median / max (beyond the message) "
        "| round trips / append: max (appends reading pages) | append ms: median / mean / max "
        "| through a seal: appends (cycle), seals, mean / max ms "
        "| tail(50): bytes received (beyond the messages) "
        "| messages(middle, 50): bytes received (beyond) | task document / pages |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for size, row in paging["sizes"].items():
        if not row["stored"]:
            error = row.get("error", "not stored").split(":")[0]
            lines.append(
                f"| {int(size):,} | **{error}** after {row.get('stored_messages', 0):,} messages "
                f"stored ({row['built_with']}, {row.get('build_seconds', 0)} s) |" + " - |" * 6
            )
            continue
        a, seal = row["appends"], row["through_a_seal"]
        tail, mid, lay = row["tail_50"], row["middle_50"], row["layout"]
        sent, beyond, ms = a["bytes_sent"], a["beyond_message"], a["ms"]
        seals = f"{seal['seals_seen']}" + ("" if seal["sealed"] else " (stopped)")
        lines.append(
            f"| {int(size):,} | {sent['median']:,.0f} / {sent['max']:,} ({beyond['median']:,.0f} "
            f"/ {beyond['max']:,}) | {a['round_trips']['max']} ({a['appends_reading_pages']}) "
            f"| {ms['median']} / {ms['mean']} / "
            f"{ms['max']} | {seal['appends_made']:,} ({seal['appends']:,}), {seals}, "
            f"{seal['ms']['mean']} / {seal['ms']['max']} | {tail['bytes_received']:,} "
            f"({tail['beyond_messages']:,}) | "
            f"{mid['bytes_received']:,} ({mid['beyond_messages']:,}) | "
            f"{_mb(lay['task_document_bytes'])} / {lay['visible_pages']} |"
        )
    return lines


def _paging_goal_rows(paging: dict[str, Any]) -> list[tuple[str, str, str, Any]]:
    goals, big, rows = paging["goals"], paging["large_conversation"], paging["sizes"]
    sizes = [f"{int(size):,}" for size in rows]
    missing = [
        f"{int(size):,}: {row.get('error', '').split(':')[0]} after "
        f"{row.get('stored_messages', 0):,} messages"
        for size, row in rows.items()
        if not row["stored"]
    ]
    lacking = f"; not stored at {'; '.join(missing)}" if missing else ""
    between = f" ({goals['ratio_sizes']})" if goals["ratio_sizes"] else ""

    def ratio(key: str) -> str:
        return "-" if goals[key] is None else f"{goals[key]}x{between}"

    read, large = big["read_back"], big["large_results"]
    if big["stored_all"]:
        stored = f"{big['messages_stored']:,} messages stored in {big['store_seconds']} s"
    else:
        stored = (
            f"**{(big['error'] or 'not stored').split(':')[0]}** after "
            f"{big['messages_stored']:,} of {big['messages_planned']:,} messages "
            f"({large['inline']} large results inline, {large['offloaded']} offloaded)"
        )
    flat = f"largest / smallest <= {paging['flat_ratio']}x"
    return [
        (
            f"bytes sent per append flat at {' / '.join(sizes)} messages (median, {flat})",
            "-",
            f"{ratio('bytes_sent_median_ratio')}; max {goals['bytes_sent_max_over_sizes']:,} B, "
            f"{goals['round_trips_max_over_sizes']} round trip(s){lacking}",
            goals["bytes_sent_flat"],
        ),
        (
            f"bytes received for tail(task, 50) flat ({flat})",
            "-",
            f"{ratio('tail_50_bytes_ratio')}{lacking}",
            goals["tail_50_flat"],
        ),
        (
            f"embedded append at {sizes[-1]} messages <= {paging['goal_time_ratio']}x an append "
            f"at {sizes[0]} (median)",
            "80-109 ms at 10,000 against about 1 ms at 100 (mongomock's update)",
            f"{ratio('append_ms_median_ratio')}; through a seal: mean "
            f"{ratio('append_ms_mean_ratio_through_a_seal')}, max "
            f"{ratio('append_ms_max_ratio_through_a_seal')}{lacking}",
            goals["append_time_within_goal"],
        ),
        (
            f"{big['messages_planned']:,}-message conversation with large tool results stores "
            "and reads back intact",
            "TaskTooLarge after 81 appends of 200 KB",
            f"{stored}; {_mb(big['messages_bson_bytes'])} of messages; read back "
            f"{read['messages']:,} in {read['seconds']} s, {read['mismatched']} differing",
            goals["big_conversation_intact"],
        ),
    ]


def _paging_tables(paging: dict[str, Any]) -> list[str]:
    """Paged storage: each goal of the issue with this run's figure, then the figures by size."""
    big = paging["large_conversation"]
    large, layout = big["large_results"], big["layout"]
    lines = [
        f"## Paged storage: the goals ({paging['backend']} backend)",
        "",
        "| goal | measured in the issue | this run | |",
        "|---|---|---|---|",
    ]
    for goal, issue, now, ok in _paging_goal_rows(paging):
        lines.append(f"| {goal} | {issue} | {now} | {_verdict(ok)} |")
    lines += [
        "",
        *_paging_sizes(paging),
        "",
        f"Large conversation: {large['inline']} tool results of {large['inline_chars']:,} "
        f"characters inline, {large['offloaded']} of {large['offloaded_chars']:,} offloaded; "
        f"stored: the task document {_mb(layout['task_document_bytes'])}, "
        f"{layout['page_documents']} pages ({_mb(layout['page_bytes'])}), "
        f"{layout['payload_documents']} payloads ({_mb(layout['payload_bytes'])}).",
        "",
        "Notes:",
        *[f"- {note}" for note in paging.get("notes", [])],
        "",
    ]
    return lines


def markdown(document: dict[str, Any]) -> str:
    results = document["results"]
    lines = ["# mindstore benchmarks", "",
             f"Run {document['created']} (Python {document['python']}, {document['machine']}"
             f"{', quick sizes' if document['quick'] else ''}). Reproduce: `scripts/bench`"
             " (add `--quick` for smaller sizes). Ratios are peer / mindstore, measured in the same run.", ""]  # fmt: skip
    lines += [f"Note: {note}" for note in document.get("notes", [])] + ([""] if document.get("notes") else [])
    lines += _lean_goals(results)
    if "paging" in results:
        lines += _paging_tables(results["paging"])
    if "append_compare" in results:
        lines += _append_tables(results["append_compare"])
    if "context" in results:
        lines += _context_tables(results["context"])
    if "storage" in results:
        lines += _storage_table(results["storage"])
    if "verbs" in results:
        lines += _verbs_tables(results["verbs"])
    if "streaming" in results:
        lines += _streaming_table(results["streaming"])
    for key, value in results.items():
        if key in ("append_compare", "context", "storage", "verbs", "paging", "streaming"):
            continue
        lines += [f"## {key}", "", "```json", json.dumps(value, indent=2), "```", ""]
    if document["failures"]:
        lines += ["## Failed modules", ""] + [f"- {k}: {v}" for k, v in document["failures"].items()] + [""]
    return "\n".join(lines)
