"""Real-server readiness: every command a full workload sends stays in the portable subset,
and every write on a sharded collection names its shard key (tenant, _id)."""

from __future__ import annotations

from collections import Counter

from mindstore.backends.recorder import RecordedCommand
from mindstore.compression import Compressor, StoredLevel
from mindstore.model.parts import CompressionConfig, TaskConfigPart, TextPart, ToolCallPart, ToolMetadata
from mindstore.portable import ALLOWED, DESIGN_SUBSET, audit, check_command, operators

CONFIG = TaskConfigPart(model_name="m", compression_config=CompressionConfig(token_limit=50, keep_recent_messages=2),
                        tool_metadata=[ToolMetadata(name="delegate", is_task_entry=True), ToolMetadata(name="search")])  # fmt: skip


def test_operator_walker_finds_nested_operators_but_not_variables():
    pipeline = [{"$match": {"tenant": "t", "x": {"$in": [1]}}},
                {"$project": {"m": {"$filter": {"input": "$messages", "as": "m", "cond": {"$eq": ["$$m.role", "user"]}}}}}]  # fmt: skip
    assert operators(pipeline) == {"$match", "$in", "$project", "$filter", "$eq"}
    bad = RecordedCommand(name="aggregate", collection="tasks", pipeline=[{"$setWindowFields": {}}])
    assert [v.problem for v in check_command(bad)] == ["operator $setWindowFields is outside the portable subset"]
    unkeyed = RecordedCommand(name="update", collection="tasks", filter={"tenant": "t"}, update={"$set": {"a": 1}})
    assert "shard key" in check_command(unkeyed)[0].problem
    tenant_wide_delete = RecordedCommand(name="delete", collection="tasks", filter={"tenant": "t"})
    assert check_command(tenant_wide_delete) == []
    insert = RecordedCommand(name="insert", collection="tasks", documents=[{"$weird": 1}])
    assert check_command(insert) == []  # inserted data is not an operator


async def test_a_full_workload_stays_portable_and_shard_safe(acme, store):
    with store.backend.recorder.capture() as log:
        tasks, dialogs = acme.tasks, acme.dialogs
        tid = (await tasks.create(owner="o", title="t", config=CONFIG)).id
        await tasks.add_human_message(tid, "hello " * 30)
        assistant = await tasks.add_assistant_message(tid)
        await tasks.add_text_part(tid, assistant.id, "thinking")
        await tasks.add_reasoning_part(tid, assistant.id, "hmm", "sig")
        await tasks.add_tool_call_part(tid, assistant.id, ToolCallPart(tool_call_id="c1", tool_name="search"))
        await tasks.add_tool_call_part(tid, assistant.id, ToolCallPart(tool_call_id="c2", tool_name="delegate"))
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
        await dialogs.delete(root, cascade=True)
        await tasks.set_state(tid, "completed")
        await tasks.delete(tid)
    assert len(log) > 50
    violations = audit(log)
    assert violations == [], violations
    used = Counter(op for command in log for op in operators(
        [command.filter, command.pipeline, command.projection] + ([] if command.name == "insert" else [command.update])))
    assert set(used) <= ALLOWED
    # the writes really were checked: updates on tasks carry tenant and _id
    updates = [c for c in log if c.name == "update" and c.collection == "tasks"]
    assert updates and all({"tenant", "_id"} <= set(c.filter) for c in updates)
    print("operators outside DESIGN.md's list that the workload used:", sorted(set(used) - DESIGN_SUBSET))
