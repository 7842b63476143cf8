"""Real-server readiness: every command stays in the portable subset and every write on a
sharded collection can be routed by its shard key (tenant, _id).

Unit tests of the auditor on wire-form commands, then an audit of a workload that runs
every repository verb, pipeline, compression strategy, dialog operation, backup, restore
and erase. (Every other test of the suite is audited too: see `portable_audit` in
tests/conftest.py.)
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import mindstore
from mindstore.backends import recorder as recorder_module
from mindstore.backends.recorder import (
    CommandRecorder,
    RecordedCommand,
    describe_command,
    observe_all,
)
from mindstore.backup import backup, erase, restore
from mindstore.compression import Compressor, StoredLevel
from mindstore.ids import task_key
from mindstore.model.parts import (
    CompressionConfig,
    TaskConfigPart,
    TextPart,
    ToolCallPart,
    ToolMetadata,
)
from mindstore.portable import (
    ALLOWED,
    DESIGN_SUBSET,
    MINDSTORE_COLLECTIONS,
    STANDARD_EXTRAS,
    TENANT_WIDE_WRITES,
    audit,
    check_command,
    is_replacement,
    operators,
    sent_operators,
)

CONFIG = TaskConfigPart(
    model_name="m", compression_config=CompressionConfig(token_limit=50, keep_recent_messages=2),
    tool_metadata=[ToolMetadata(name="delegate", is_task_entry=True), ToolMetadata(name="search")],
)  # fmt: skip
SRC = Path(__file__).resolve().parents[1] / "src" / "mindstore"


def wire(name: str, command: dict[str, Any]) -> RecordedCommand:
    """A record built the way both backends build theirs, from the command as sent."""
    return RecordedCommand(name=name, **describe_command(name, {**command, "$db": "d"}))


def update(coll: str, *statements: tuple[dict[str, Any], Any, bool]) -> RecordedCommand:
    return wire("update", {"update": coll, "ordered": True,
                           "updates": [{"q": q, "u": u, "multi": m, "upsert": False}
                                       for q, u, m in statements]})  # fmt: skip


def delete(coll: str, q: dict[str, Any], limit: int) -> RecordedCommand:
    return wire("delete", {"delete": coll, "ordered": True, "deletes": [{"q": q, "limit": limit}]})


def problems(command: RecordedCommand) -> list[str]:
    return [v.problem for v in check_command(command)]


KEYED = {"_id": "t1", "tenant": "acme"}
SET = {"$set": {"title": "x"}}


# ---------------------------------------------------------------- operator walker
def test_walker_finds_nested_operators_but_not_variables_or_field_paths():
    users = {"input": "$messages", "as": "m", "cond": {"$eq": ["$$m.role", "user"]}}
    pipeline = [{"$match": {"tenant": "t", "x": {"$in": [1]}}},
                {"$project": {"m": {"$filter": users}}}]  # fmt: skip
    assert operators(pipeline) == {"$match", "$in", "$project", "$filter", "$eq"}
    assert operators({"$$ROOT": 1, "a": ["$b", {"c": "$d"}]}) == set()


def test_operators_outside_the_subset_are_reported_wherever_they_are_sent():
    agg = wire(
        "aggregate", {"aggregate": "tasks", "pipeline": [{"$setWindowFields": {}}], "cursor": {}}
    )
    assert problems(agg) == ["operator $setWindowFields is outside the portable subset"]
    find = wire("find", {"find": "tasks", "filter": {"tenant": "a", "$where": "true"}})
    assert problems(find) == ["operator $where is outside the portable subset"]
    # the second statement of a bulk update is audited too, not just the first
    bulk = update("tasks", (KEYED, SET, False), (KEYED, {"$rename": {"a": "b"}}, False))
    assert problems(bulk) == ["operator $rename is outside the portable subset"]
    pipeline_update = update("tasks", (KEYED, [{"$replaceWith": {"a": 1}}], False))
    assert problems(pipeline_update) == ["operator $replaceWith is outside the portable subset"]


def test_stored_data_is_not_mistaken_for_operators():
    insert = wire("insert", {"insert": "tasks", "documents": [{**KEYED, "$weird": 1}]})
    replace = update("tasks", (KEYED, {**KEYED, "metadata": {"$odd": 1}}, False))
    assert problems(insert) == [] and problems(replace) == []
    assert sent_operators(replace) == set()


# ---------------------------------------------------------------- shard key
@pytest.mark.parametrize("coll", ["tasks", "dialog_nodes", "payloads"])
def test_single_document_writes_need_tenant_and_id_by_equality(coll: str):
    assert problems(update(coll, (KEYED, SET, False))) == []
    assert problems(update(coll, ({"tenant": "acme"}, SET, False))) == [
        "single-document write filter lacks _id equality (shard key)"
    ]
    assert problems(update(coll, ({"_id": "t1"}, SET, False))) == [
        "write filter lacks tenant equality (shard key)"
    ]
    assert problems(update(coll, ({"_id": {"$in": ["a"]}, "tenant": "acme"}, SET, False)))
    assert problems(update(coll, ({"_id": "t1", "tenant": {"$in": ["a", "b"]}}, SET, False)))
    assert problems(delete(coll, {"tenant": "acme"}, limit=1))
    fam = wire(
        "findAndModify",
        {"findAndModify": coll, "query": {"tenant": "acme", "version": 3}, "update": SET},
    )
    assert problems(fam) == ["single-document write filter lacks _id equality (shard key)"]
    bad_insert = wire("insert", {"insert": coll, "documents": [KEYED, {"_id": "t2"}]})
    assert problems(bad_insert) == ["inserted document lacks tenant or _id (shard key)"]


def test_multi_document_writes_need_the_tenant_and_ids_or_an_allow_listed_shape():
    assert problems(delete("tasks", {"tenant": "acme", "_id": {"$in": ["a", "b"]}}, limit=0)) == []
    assert problems(delete("tasks", {"tenant": "acme"}, limit=0)) == [
        "tenant-wide delete on tasks with filter ['tenant'] is not in TENANT_WIDE_WRITES"
    ]
    assert problems(delete("tasks", {"tenant": "acme", "_id": {"$gt": "a"}}, limit=0)) == [
        "multi-document write with an _id that is not a value or $in list"
    ]
    assert problems(update("dialog_nodes", ({"root_id": "r"}, SET, True))) == [
        "write filter lacks tenant equality (shard key)"
    ]
    # the documented admin path: a deleted task's payloads
    assert ("delete", "payloads", frozenset({"tenant", "task_id"})) in TENANT_WIDE_WRITES
    assert problems(delete("payloads", {"tenant": "acme", "task_id": "t1"}, limit=0)) == []
    assert problems(delete("payloads", {"task_id": "t1"}, limit=0)) == [
        "write filter lacks tenant equality (shard key)"
    ]
    # collections that are not sharded are only checked for operators
    assert problems(delete("other", {}, limit=0)) == []


def test_the_suite_wide_audit_can_be_scoped_to_mindstores_collections():
    scratch = wire("aggregate", {"aggregate": "scratch", "pipeline": [{"$skip": 1}], "cursor": {}})
    ours = wire("aggregate", {"aggregate": "tasks", "pipeline": [{"$skip": 1}], "cursor": {}})
    assert len(audit([scratch, ours])) == 2
    assert [v.collection for v in audit([scratch, ours], collections=MINDSTORE_COLLECTIONS)] == [
        "tasks"
    ]
    assert {"tasks", "dialog_nodes", "payloads"} <= MINDSTORE_COLLECTIONS


def test_the_allowed_set_lists_only_operators_the_code_uses():
    assert not set(STANDARD_EXTRAS) & DESIGN_SUBSET
    assert all(note.strip() for note in STANDARD_EXTRAS.values())
    sources = "".join(
        p.read_text()
        for p in SRC.rglob("*.py")
        if p.name != "portable.py" and "backends" not in p.parts
    )
    unused = [op for op in STANDARD_EXTRAS if not re.search(rf"[\"']{re.escape(op)}[\"']", sources)]
    assert unused == [], f"listed as used but not found in src/mindstore: {unused}"


# ---------------------------------------------------------------- observation
async def test_observe_all_sees_every_recorder_whole():
    quiet = CommandRecorder(enabled=False)
    lean = CommandRecorder(keep_payloads=False)
    with observe_all() as log:
        quiet.record(RecordedCommand(name="find", filter={"a": 1}))
        lean.record(RecordedCommand(name="find", filter={"b": 1}))
    assert [c.filter for c in log] == [{"a": 1}, {"b": 1}]
    assert len(quiet) == 0 and lean.records[0].filter is None


async def test_observed_commands_name_the_code_that_sent_them(acme, store):
    with observe_all() as log:
        task = await acme.tasks.create(title="t")
        await store.database["tasks"].update_one(
            {"_id": task_key("acme", task.id)}, {"$set": {"title": "raw"}}
        )
    library, direct = log[0].origin or "", log[-1].origin or ""
    assert library.startswith(str(SRC)), library  # the repository, not beanie or the adapter
    assert direct.startswith(__file__ + ":"), direct
    assert audit(log[-1:]) != []  # the raw write lacks the tenant: the fixture skips it by origin


def test_the_suite_wide_audit_is_active():
    assert recorder_module._OBSERVERS, "tests/conftest.py's portable_audit fixture is not observing"


# ---------------------------------------------------------------- a full workload
async def _workload(store: mindstore.Store, tmp: Path) -> None:
    acme = store.scoped("acme")
    tasks, dialogs = acme.tasks, acme.dialogs
    tid = (await tasks.create(owner="o", title="t", config=CONFIG)).id
    await tasks.add_human_message(tid, "hello " * 30)
    assistant = await tasks.add_assistant_message(tid)
    await tasks.add_text_part(tid, assistant.id, "thinking")
    await tasks.add_reasoning_part(tid, assistant.id, "hmm", "sig")
    await tasks.add_tool_call_part(
        tid, assistant.id, ToolCallPart(tool_call_id="c1", tool_name="search")
    )
    await tasks.add_tool_call_part(
        tid, assistant.id, ToolCallPart(tool_call_id="c2", tool_name="delegate")
    )
    await tasks.finish_assistant_message(tid, assistant.id, tokens_in=10, tokens_out=5, cost=0.1)
    await tasks.answer_tool_call(tid, "c1", {"hits": ["x" * 300]})
    await tasks.add_task_entry(tid, [TextPart(text="sub")], CONFIG, entry_id="e1")
    await tasks.add_human_message(tid, "inside " * 40)
    await tasks.add_informational_message(tid, "note", "details")
    await tasks.add_task_exit(tid, [TextPart(text="done")])
    await tasks.get_updates(tid, since_id=assistant.id)
    await tasks.current_task_messages(tid)
    await tasks.find_current_task_boundaries(tid)
    await tasks.task_boundaries(tid, "e1")
    await tasks.sub_task_spans(tid)
    await tasks.tail(tid, 3)
    await tasks.get_message(tid, assistant.id)
    await tasks.list(owner="o", limit=5)
    for strategy in ("tool_compression", "compact_summarization", "truncate_and_summarize"):
        compressor = Compressor(strategy, CONFIG.compression_config)
        await compressor.load(StoredLevel(tasks, tid))
        await compressor.compress()
    await tasks.context(tid, max_tokens=200)
    await tasks.set_title(tid, "renamed")
    root = (await dialogs.create("agent", "sys")).id
    await dialogs.put_text(root, "hi")
    child = (await dialogs.fork(root)).id
    await dialogs.fork(root, last_n=1, first_k=1)
    await dialogs.fork(child, at=(await tasks.messages(child))[0].id)
    await dialogs.tree_overview(root)
    await dialogs.children(root)
    await dialogs.repair()
    await backup(store, tmp / "acme", tenant="acme")
    await tasks.set_title(tid, "changed after the backup")
    assert (await restore(store, tmp / "acme", mode="overwrite")).totals[
        "overwritten"
    ] >= 1  # ReplaceOne
    await erase(store, "acme", owner="o")
    assert (await restore(store, tmp / "acme")).totals["inserted"] >= 1  # insert_many
    await dialogs.delete(root, cascade=True)
    await tasks.set_state(tid, "completed")
    await tasks.delete(tid)
    await erase(store, "acme")


async def test_a_full_workload_stays_portable_and_shard_safe(store, tmp_path):
    with store.backend.recorder.capture(payloads=True) as log:
        await _workload(store, tmp_path)
    assert audit(log) == []
    used = Counter(op for command in log for op in sent_operators(command))
    assert set(used) <= ALLOWED
    # the shard-key rule really was exercised on every kind of write
    kinds = {(c.name, c.collection) for c in log}
    for kind in [("update", "tasks"), ("insert", "tasks"), ("delete", "tasks"),
                 ("insert", "dialog_nodes"), ("delete", "dialog_nodes"),
                 ("delete", "payloads")]:  # fmt: skip
        assert kind in kinds, kind
    assert any(
        is_replacement(w["u"]) for c in log if c.name == "update" for w in c.writes or []
    )  # restore
    print(
        "operators outside DESIGN.md's list used by the workload:",
        sorted(set(used) - DESIGN_SUBSET),
    )
