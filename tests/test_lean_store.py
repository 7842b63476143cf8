"""The lean stored form in the store: verbs keep documents lean and `size_bytes` exact, and
documents stored before it (every field written out, the task id on every message) give
the same answers to every read, pipeline, context window, analytics report and backup.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import bson
import pytest

from layout import flat_task, unpaged
from mindstore.backup import backup, restore, verify
from mindstore.backup.shape import check_task
from mindstore.documents import task_document
from mindstore.errors import ValidationError
from mindstore.model.messages import AssistantMessage, Usage, message_to_dict, parse_message
from mindstore.model.paging import PagePolicy
from mindstore.model.parts import (
    TaskConfigPart,
    TextPart,
    ToolCallPart,
    ToolMetadata,
)
from mindstore.model.plans import full_stored_doc, stored_doc
from mindstore.model.plans.redaction import redaction_of
from mindstore.model.storage_form import bson_size
from mindstore.model.task import Task
from mindstore.pipelines import analytics as pipelines
from mindstore.store import Store
from test_backup_support import new_store

CONFIG = TaskConfigPart(model_name="openai/gpt-4o", tool_metadata=[
    ToolMetadata(name="search"), ToolMetadata(name="delegate", is_task_entry=True)])  # fmt: skip
SUB = TaskConfigPart(model_name="openai/gpt-4o-mini", tool_metadata=[ToolMetadata(name="search")])


@contextmanager
def deterministic() -> Iterator[None]:
    """Ids and clock from counters: two builds of a conversation are the same."""
    ids, ticks = itertools.count(), itertools.count()
    with (
        mock.patch("mindstore.model.base.ID_SOURCE", lambda: f"id{next(ids)}"),
        mock.patch("mindstore.model.base.CLOCK", lambda: 1_700_000_000 + 0.7 * next(ticks)),
    ):
        yield


def conversation(task_id: str) -> Task:
    """Every shape the pipelines read: levels, a sub-task, tool calls with answers and an
    error, usage objects and Mind Map counters, a model-visible note, an unknown role."""
    with deterministic():
        task = Task(id=task_id)
        task.add_task_config(CONFIG)
        task.add_system_message("You are careful.")
        for turn in range(3):
            task.add_human_message(f"question {turn}")
            reply = task.add_assistant_message()
            task.add_reasoning_part(reply.id, "thinking")
            task.add_text_part(reply.id, f"answer {turn}")
            call = ToolCallPart(
                tool_call_id=f"c{turn}", tool_name="delegate" if turn == 1 else "search"
            )
            task.add_tool_call_part(reply.id, call)
            usage = Usage(input_tokens=100 + turn, output_tokens=7) if turn == 2 else None
            task.finish_assistant_message(
                reply.id, tokens_in=40 * turn, cost=0.001 * turn, usage=usage
            )
            if turn == 1:
                task.add_task_entry([TextPart(text="sub-task")], SUB)
                inner = task.add_assistant_message()
                task.add_tool_call_part(
                    inner.id, ToolCallPart(tool_call_id="in1", tool_name="search")
                )
                task.answer_tool_call("in1", "failed", is_error=True)
                task.add_task_exit([TextPart(text="done")])
            else:
                task.answer_tool_call(call.tool_call_id, {"hits": [turn]})
        task.add_informational_message("note", "visible to the model", is_visible_ai=True)
        task.add_message(parse_message({"role": "plugin", "id": "p1", "blob": {"$ref": "x"}}))
        # a framework's turn: no model, no status change, a call answered by a plain result
        task.add_message(AssistantMessage(status="completed", tokens_out=3, content=[
            ToolCallPart(tool_call_id="x1", tool_name="search", is_loading=False)]))  # fmt: skip
        task.answer_tool_call("x1", "ok")
        task.add_human_message("last")
    return task


def old_form(task: Task, tenant: str, owner: str = "alice") -> dict[str, Any]:
    """The task document as mindstore wrote it before the lean form."""
    document = task_document(task, tenant, owner=owner)
    document["messages"] = [full_stored_doc(m) for m in task.messages]
    document["size_bytes"] = sum(bson_size(d) for d in document["messages"])
    return document


async def stored(store, tenant: str, task_id: str) -> dict[str, Any]:
    """The task document as an unpaged task holds it: every message, sealed pages included."""
    return await flat_task(store.database, f"{tenant}/{task_id}")


def dumps(messages) -> list[dict[str, Any]]:
    return [message_to_dict(m) for m in messages]


async def reads(tenant, tid: str) -> dict[str, Any]:
    """Everything a caller can read of one task, in comparable form."""
    tasks = tenant.tasks
    spans = await tasks.sub_task_spans(tid)
    window = await tasks.context(tid, max_tokens=400, auto_compress=False)
    return {
        "messages": dumps(await tasks.messages(tid)),
        "root": dumps(await tasks.level_messages(tid, None)),
        "levels": [dumps(await tasks.level_messages(tid, span.entry_id)) for span in spans],
        "spans": spans,
        "boundaries": [await tasks.task_boundaries(tid, span.entry_id) for span in spans],
        "current": dumps(await tasks.current_task_messages(tid)),
        "tail": dumps(await tasks.tail(tid, 3)),
        "one": message_to_dict(await tasks.get_message(tid, "p1")),
        "window": (dumps(window), window.left_out, window.tokens),
        # where the history is cut into pages is storage, not what a caller reads
        "header": unpaged(await tasks.header(tid)).model_dump(exclude={"size_bytes"}),
    }


async def reports(tenant) -> dict[str, Any]:
    analytics = tenant.analytics
    return {
        "usage": await analytics.usage(group_by=("model", "owner", "period"), period="day"),
        "owners": await analytics.top_owners(),
        "latency": await analytics.latency(group_by=("model", "period"), period="day"),
        "tools": await analytics.tools(group_by=("model",)),
        "sessions": await analytics.sessions(),
        "subtasks": await analytics.subtasks(),
        "activity": await analytics.activity(),
    }


# ----------------------------------------------------------------------------- lean writes


async def test_verbs_write_lean_documents_with_an_exact_size(acme, store):
    task = conversation("lean")
    await acme.tasks.import_task(task, owner="alice")
    document = await stored(store, "acme", "lean")
    for message in document["messages"]:
        assert "task_id" not in message and message.get("depth", 1) > 0
        assert not [k for k, v in message.items() if v is None and k != "finished_ts"], message
    assert document["size_bytes"] == sum(bson_size(m) for m in document["messages"])
    assert document["messages"] == [stored_doc(m, "lean") for m in task.messages]
    assert bson_size({"m": document["messages"]}) < 0.6 * bson_size(
        {"m": [full_stored_doc(m) for m in task.messages]}
    )


async def test_a_field_set_back_to_its_default_is_unset_in_the_same_update(acme, store):
    tid = (await acme.tasks.create(config=CONFIG)).id
    reply = await acme.tasks.add_assistant_message(tid)
    await acme.tasks.finish_assistant_message(tid, reply.id, tokens_in=5)
    assert (await stored(store, "acme", tid))["messages"][-1]["status"] == "completed"
    with store.backend.recorder.capture(payloads=True) as log:
        again = await acme.tasks.add_text_part(tid, reply.id, "more")  # the turn opens again
    (update,) = log.by_name("update")
    assert update.update["$unset"] == {"messages.1.status": ""}  # config, then the reply
    assert log.names() == ["update"]  # warm: planned from the cached last message
    document = await stored(store, "acme", tid)
    assert "status" not in document["messages"][-1] and again.status == "loading"
    assert (await acme.tasks.get_message(tid, reply.id)) == again
    assert document["size_bytes"] == sum(bson_size(m) for m in document["messages"])
    finished = await acme.tasks.finish_assistant_message(
        tid, reply.id, status="loading", tokens_in=0
    )
    document = await stored(store, "acme", tid)
    assert "tokens_in" not in document["messages"][-1] and finished.tokens_in == 0
    assert document["size_bytes"] == sum(bson_size(m) for m in document["messages"])


async def test_redaction_unsets_the_metadata_and_stays_exact(acme, store):
    tid = (await acme.tasks.create()).id
    message = AssistantMessage(
        content=[TextPart(text="secret")], metadata={"k": "v"}, status="completed"
    )
    await acme.tasks.add_message(tid, message)
    redacted = await acme.tasks.redact(tid, message.id, reason="gdpr")
    document = await stored(store, "acme", tid)
    assert "metadata" not in document["messages"][0] and redacted.metadata is None
    assert document["messages"][0]["content"] == [{"type": "text", "text": ""}]
    assert document["size_bytes"] == sum(bson_size(m) for m in document["messages"])


# ----------------------------------------------------------------------------- old documents


async def test_documents_stored_before_read_and_query_the_same(store):
    lean, old = store.scoped("lean"), store.scoped("old")
    await lean.tasks.import_task(conversation("T"), owner="alice")
    await store.database["tasks"].insert_one(old_form(conversation("T"), "old"))
    assert all("task_id" in m for m in (await stored(store, "old", "T"))["messages"])
    assert await reads(old, "T") == await reads(lean, "T")
    assert await reports(old) == await reports(lean)


async def raw_rows(store, tenant: str) -> dict[str, bytes]:
    """Every analytics pipeline's rows, as BSON (a group key without a field and one with
    null, or a count 0 and a cost 0.0, are different rows here)."""
    f = pipelines.ReportFilter(tenant=tenant)
    built = {
        "usage": pipelines.usage_pipeline(f, ("model", "owner", "period")),
        "owners": pipelines.top_owners_pipeline(f),
        "latency": pipelines.latency_pipeline(f, ("model", "period")),
        "tools": pipelines.tools_pipeline(f, ("model", "period")),
        "sessions": pipelines.sessions_pipeline(f),
        "subtasks": pipelines.subtasks_pipeline(f),
        "activity": pipelines.message_activity_pipeline(f),
    }
    out = {}
    for name, pipeline in built.items():
        rows = await (await store.database["tasks"].aggregate(pipeline)).to_list(None)
        out[name] = b"".join(sorted(bson.encode(row) for row in rows))
    return out


async def test_analytics_pipelines_give_the_same_rows_for_both_forms(store):
    # the pipelines of the task documents alone, on two unpaged documents (the reports
    # over pages read the same, test_a_collection_mixing_both_forms_reports_as_if_all_were_lean)
    unpaged_store = Store(store.backend, page_policy=None)
    await unpaged_store.scoped("lean").tasks.import_task(conversation("T"), owner="alice")
    await store.database["tasks"].insert_one(old_form(conversation("T"), "old"))
    lean, old = await raw_rows(store, "lean"), await raw_rows(store, "old")
    assert all(lean.values())
    assert lean == old


async def test_a_collection_mixing_both_forms_reports_as_if_all_were_lean(store):
    mixed, lean = store.scoped("mixed"), store.scoped("twice")
    for task_id, owner in (("A", "alice"), ("B", "bob")):
        await lean.tasks.import_task(conversation(task_id), owner=owner)
    await mixed.tasks.import_task(conversation("A"), owner="alice")
    await store.database["tasks"].insert_one(old_form(conversation("B"), "mixed", owner="bob"))
    expected = await reports(lean)
    assert expected["usage"] and expected["tools"] and expected["subtasks"]
    assert await reports(mixed) == expected


async def test_writes_to_an_old_document_read_back_and_still_verify(store, tmp_path):
    old = store.scoped("old")
    task = conversation("T")
    await store.database["tasks"].insert_one(old_form(task, "old"))
    reply = await old.tasks.add_assistant_message("T")  # a lean message after old ones
    await old.tasks.add_tool_call_part(
        "T", reply.id, ToolCallPart(tool_call_id="late", tool_name="search")
    )
    await old.tasks.answer_tool_call("T", "late", {"ok": True})
    first_reply = next(m for m in task.messages if m.role == "assistant")
    await old.tasks.add_text_part("T", first_reply.id, "appended to an old message")
    await old.tasks.redact("T", task.messages[2].id)
    document = await stored(store, "old", "T")
    actual = sum(bson_size(m) for m in document["messages"])
    assert actual <= document["size_bytes"]  # patches planned on the lean form never under-count
    check_task(document)  # the backup shape check accepts the mixed document
    messages = await old.tasks.messages("T")
    assert (
        messages[-1].content[0].result == {"ok": True}
        and messages[-2].content[0].is_loading is False
    )
    assert messages[3].content[-1].text == "appended to an old message"
    forged = {
        **document,
        "size_bytes": actual + 10 * sum(bson_size(full_stored_doc(m)) for m in messages),
    }
    with pytest.raises(ValueError, match="size_bytes"):
        check_task(forged)


@pytest.mark.parametrize("sealed_first", [False, True])
async def test_an_old_document_patched_and_paged_still_verifies(store, tmp_path, sealed_first):
    """A patch of a message of the earlier form counts its size above the exact change;
    the pages (sealed and folded by measuring) hold exact sizes. So the task's
    `sealed_bytes` and `size_bytes` may lie above its pages, within the sealed messages'
    allowance, whether the message was patched in a page (`sealed_first`) or before a seal
    moved it into one; backup verify accepts exactly that."""
    old = Store(store.backend, page_policy=PagePolicy(page_messages=3)).scoped("old")
    task = conversation("T")
    await store.database["tasks"].insert_one(old_form(task, "old"))
    # messages of the earlier form: the last stays open after the first seal, the one
    # three before it is sealed then
    target = task.messages[-3 if sealed_first else -1]
    if sealed_first:
        await old.tasks.add_human_message("T", "the write that seals")
        assert (await old.tasks.header("T")).sealed > len(task.messages) - 3
    await old.tasks.redact("T", target.id)
    for i in range(8):  # the patched message goes into a page, if it was not in one already
        await old.tasks.add_human_message("T", f"after {i}")
    document = await store.database["tasks"].find_one({"_id": "old/T"})
    pages = await store.database["task_pages"].find({"task": "old/T"}).to_list(None)
    assert document["sealed"] > len(task.messages) - 1  # the redacted message is sealed
    exact = sum(page["size_bytes"] for page in pages) + sum(
        bson_size(m) for m in document["messages"])  # fmt: skip
    assert document["size_bytes"] > exact  # the earlier form's over-count
    assert redaction_of(await old.tasks.get_message("T", target.id)) is not None
    await backup(store, tmp_path / "b")
    assert (await verify(tmp_path / "b")).counts["task_pages"] == len(pages)
    check_task(await stored(store, "old", "T"))


async def test_a_lean_document_allows_no_size_slack():
    task = conversation("T")
    document = task_document(task, "acme")
    check_task(document)
    with pytest.raises(ValueError, match="size_bytes"):
        check_task({**document, "size_bytes": document["size_bytes"] + 1})


async def test_backup_of_both_forms_verifies_and_restores_unchanged(store, tmp_path):
    await store.scoped("lean").tasks.import_task(conversation("T"), owner="alice")
    await store.database["tasks"].insert_one(old_form(conversation("T"), "old"))
    await backup(store, tmp_path / "b")
    assert (await verify(tmp_path / "b")).counts["tasks"] == 2
    target = await new_store()
    try:
        await restore(target, tmp_path / "b")
        for tenant in ("lean", "old"):
            before, after = await stored(store, tenant, "T"), await stored(target, tenant, "T")
            assert bson.encode({"m": after["messages"]}) == bson.encode({"m": before["messages"]})
            assert await reads(target.scoped(tenant), "T") == await reads(store.scoped(tenant), "T")
    finally:
        await target.close()


async def test_a_message_of_another_task_keeps_its_task_id(acme, store):
    tid = (await acme.tasks.create()).id
    await acme.tasks.add_message(tid, AssistantMessage(id="m1", task_id="elsewhere"))
    await acme.tasks.add_human_message(tid, "mine", message_id="m2")
    raw = (await stored(store, "acme", tid))["messages"]
    assert raw[0]["task_id"] == "elsewhere" and "task_id" not in raw[1]
    assert [m.task_id for m in await acme.tasks.messages(tid)] == ["elsewhere", tid]
    with pytest.raises(ValidationError, match="message id"):  # a refused write stores nothing
        await acme.tasks.add_message(tid, AssistantMessage(id="$m3", task_id="elsewhere"))
    assert len((await stored(store, "acme", tid))["messages"]) == 2
