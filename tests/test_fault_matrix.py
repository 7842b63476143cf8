"""Every write path under every fault: typed errors, all or nothing, exactly one effect.

For each write path (every verb of `tasks` and `dialogs`, seals and folds, the context
window's compression, streaming, backup, restore, erase, retention, the integrations'
saves) the matrix injects, at every command position it sends (counted on a dry run), each
fault kind (`mindstore.backends.faults`: refused before it is applied, applied with its
reply lost, a crash before or after it), cycling through PyMongo's transient errors, and
asserts (`tests/fault_matrix.py`): the caller gets `Unavailable` (the driver's error as its
cause, the operation named, what a retry does said when the call named no id); the stored
state is unchanged or the whole effect; the same call retried converges to exactly one
effect, returns what one call returns, and a backup of the tenant verifies. The suite runs
it at the default page size and with 3-message pages (`MINDSTORE_PAGE_MESSAGES=3`), where
the conversations below are sealed into pages, so seals and folds are among the writes.

The keyring verbs (re-encryption sweep, key rotation, shredding) are not in this matrix.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fault_matrix import Draws, Tally, WritePath, deterministic, run_matrix
from mindstore import Store, Task, TenantStore
from mindstore.backup import backup, erase, restore
from mindstore.backup.retention import erase_before
from mindstore.errors import Conflict, NotFound
from mindstore.formats.agent_state import AgentState
from mindstore.model.messages import SystemMessage, UserMessage
from mindstore.model.parts import (
    CompressionConfig,
    TaskConfigPart,
    TextPart,
    ToolCallPart,
    ToolMetadata,
)

SMALL = CompressionConfig(token_limit=400, keep_recent_messages=3, keep_first_messages=1)
CONFIG = TaskConfigPart(
    model_name="m", compression_config=SMALL,
    tool_metadata=[ToolMetadata(name="search"), ToolMetadata(name="delegate", is_task_entry=True)],
)  # fmt: skip
SUB = TaskConfigPart(model_name="m-sub", tool_metadata=[ToolMetadata(name="search")])


async def conversation(view: TenantStore) -> dict[str, Any]:
    """Task T: a config, two user turns, an answered and an open tool call, an open
    assistant turn last (the part verbs' message). With 3-message pages the first
    messages are sealed, so a verb on them changes a sealed page (a fold)."""
    tasks = view.tasks
    await tasks.create(task_id="T", owner="ann", config=CONFIG)
    await tasks.add_human_message("T", "find a hotel in Lisbon", message_id="u1")
    await tasks.add_assistant_message("T", message_id="a1")
    await tasks.add_text_part("T", "a1", "looking")
    call = ToolCallPart(tool_call_id="c1", tool_name="search", args={"q": "hotels"})
    await tasks.add_tool_call_part("T", "a1", call)
    await tasks.finish_assistant_message("T", "a1", tokens_in=40, tokens_out=8)
    await tasks.add_human_message("T", "near the river", message_id="u2")
    await tasks.add_message("T", SystemMessage(id="s1", content=[TextPart(text="be brief")]))
    await tasks.add_assistant_message("T", message_id="a2")
    return {}


async def in_subtask(view: TenantStore) -> dict[str, Any]:
    await conversation(view)
    await view.tasks.add_task_entry("T", [TextPart(text="compare two")], SUB, entry_id="e1")
    return {}


async def long_conversation(view: TenantStore) -> dict[str, Any]:
    """A conversation past its compression limit (`SMALL`): `context()` compresses."""
    tasks = view.tasks
    await tasks.create(task_id="T", owner="ann", config=CONFIG)
    for round_ in range(5):
        await tasks.add_human_message("T", f"question {round_} " * 20, message_id=f"q{round_}")
        await tasks.add_assistant_message("T", message_id=f"r{round_}")
        await tasks.add_text_part("T", f"r{round_}", f"answer {round_} " * 30)
        await tasks.finish_assistant_message("T", f"r{round_}", tokens_in=100, tokens_out=60)
    return {}


async def dialog_tree(view: TenantStore) -> dict[str, Any]:
    await view.dialogs.create("planner", "You plan trips.", dialog_id="D")
    for i in range(4):
        await view.dialogs.put_text("D", f"step {i}")
    await view.dialogs.fork("D", last_n=2)
    return {}


def history(count: int, prefix: str = "h") -> list[Any]:
    return [UserMessage(id=f"{prefix}{i}", content=[TextPart(text=f"line {i} " * 5)])
            for i in range(count)]  # fmt: skip


def arguments(**made: Any) -> Any:
    """A setup that only makes the call's arguments (so a retry passes the same objects,
    as a caller's retry would)."""

    async def setup(view: TenantStore) -> dict[str, Any]:
        return {name: make() for name, make in made.items()}

    return setup


def after(first: Any, **made: Any) -> Any:
    """A setup: `first`, then the call's arguments."""

    async def setup(view: TenantStore) -> dict[str, Any]:
        context = await first(view)
        return {**context, **{name: make() for name, make in made.items()}}

    return setup


def in_memory() -> Task:
    task = Task(id="M")
    task.add_task_config(CONFIG)
    for i in range(7):
        task.add_human_message(f"imported {i}", message_id=f"m{i}")
    return task


def streamed(view: TenantStore, context: dict[str, Any]) -> Any:
    """A stream's writes: open it, send deltas, flush. A retry of a stream is its
    `flush()` (the stream keeps what is pending and settles a write whose reply was lost),
    then leaving the block."""

    async def run() -> Any:
        stream = context.get("stream")
        if stream is None or stream.tasks.database is not view.store.database:
            stream = view.tasks.stream("T", "a2", flush_ms=3_600_000, flush_bytes=1 << 20)
            await stream.__aenter__()
            await stream.text("The river hotel ")
            await stream.reasoning("cheaper")
            await stream.text("is closer.")
            context["stream"] = stream  # entered, deltas given: a retry flushes it
        await stream.flush()
        await stream.__aexit__(None, None, None)
        context.pop("stream", None)
        return stream.message

    return run()


def backed_up(view: TenantStore, context: dict[str, Any]) -> Any:
    async def run() -> Any:
        folder = Path(context["folder"])
        await backup(view.store, folder / "copy", tenant=view.tenant)
        return sorted(p.name for p in (folder / "copy").iterdir())

    return run()


async def with_folder(view: TenantStore) -> dict[str, Any]:
    import tempfile

    await conversation(view)
    return {"folder": tempfile.mkdtemp()}


async def restorable(view: TenantStore) -> dict[str, Any]:
    """A backup of another tenant's conversation, to restore into this one."""
    import tempfile

    source = view.store.scoped(view.tenant + "src")
    await conversation(source)
    folder = Path(tempfile.mkdtemp()) / "b"
    await backup(view.store, folder, tenant=source.tenant)
    return {"path": str(folder)}


PATHS = [
    # ------------------------------------------------------------------ lifecycle
    WritePath("tasks.create(task_id, config)", lambda v, c: v.tasks.create(
        task_id="N", owner="ann", config=CONFIG), crash_answers=(Conflict,)),
    WritePath("tasks.create() (id drawn)", lambda v, c: v.tasks.create(owner="ann", title="x"),
              named=False),
    WritePath("tasks.create(task_id, config, long history)", lambda v, c: v.tasks.create(
        task_id="L", owner="ann", config=CONFIG, messages=c["history"]),
        arguments(history=lambda: history(8)), crash_answers=(Conflict,)),
    WritePath("tasks.import_task", lambda v, c: v.tasks.import_task(c["task"], owner="ann"),
              arguments(task=in_memory), crash_answers=(Conflict,)),
    WritePath("tasks.delete", lambda v, c: v.tasks.delete("T"), conversation,
              crash_answers=(NotFound,)),
    WritePath("tasks.set_state", lambda v, c: v.tasks.set_state("T", "completed"), conversation),
    WritePath("tasks.set_title", lambda v, c: v.tasks.set_title("T", "Lisbon"), conversation),
    WritePath("tasks.save_agent_state", lambda v, c: v.tasks.save_agent_state(
        "T", c["state"], messages=c["messages"]), after(
        conversation, state=lambda: AgentState(context_summary="so far"),
        messages=lambda: history(2, "g"))),
    # ------------------------------------------------------------------ appends
    WritePath("tasks.add_message", lambda v, c: v.tasks.add_message("T", c["message"]), after(
        conversation, message=lambda: UserMessage(id="m1", content=[TextPart(text="hi")]))),
    WritePath("tasks.add_messages", lambda v, c: v.tasks.add_messages("T", c["messages"]),
              after(conversation, messages=lambda: history(3, "n"))),
    WritePath("tasks.add_task_config", lambda v, c: v.tasks.add_task_config("T", SUB),
              conversation, named=False),
    WritePath("tasks.add_human_message(message_id)", lambda v, c: v.tasks.add_human_message(
        "T", "and breakfast?", message_id="u3"), conversation),
    WritePath("tasks.add_human_message()", lambda v, c: v.tasks.add_human_message(
        "T", "and breakfast?"), conversation, named=False),
    WritePath("tasks.add_system_message", lambda v, c: v.tasks.add_system_message(
        "T", "be kind", message_id="s2"), conversation),
    WritePath("tasks.add_informational_message", lambda v, c: v.tasks.add_informational_message(
        "T", "status", "searching", message_id="i1"), conversation),
    WritePath("tasks.add_assistant_message(message_id)",
              lambda v, c: v.tasks.add_assistant_message("T", message_id="a3"), conversation),
    WritePath("tasks.add_assistant_message()", lambda v, c: v.tasks.add_assistant_message("T"),
              conversation, named=False),
    WritePath("tasks.add_tool_result_message", lambda v, c: v.tasks.add_tool_result_message(
        "T", "c1", "search", {"hits": 2}, message_id="t1"), conversation),
    WritePath("tasks.answer_tool_call(message_id)", lambda v, c: v.tasks.answer_tool_call(
        "T", "c1", {"hits": 3}, message_id="r1"), conversation),
    WritePath("tasks.answer_tool_call()", lambda v, c: v.tasks.answer_tool_call(
        "T", "c1", {"hits": 3}), conversation, named=False),
    WritePath("tasks.add_compression_message", lambda v, c: v.tasks.add_compression_message(
        "T", 1, 2, "manual", ["tool_compression"], ["u1"], ["u2"], message_id="k1"),
        conversation),
    WritePath("tasks.add_task_entry", lambda v, c: v.tasks.add_task_entry(
        "T", [TextPart(text="compare two")], SUB, entry_id="e1"), conversation),
    WritePath("tasks.add_task_exit", lambda v, c: v.tasks.add_task_exit(
        "T", [TextPart(text="done")], exit_id="x1"), in_subtask),
    WritePath("tasks.retract_last(expected_id)", lambda v, c: v.tasks.retract_last(
        "T", expected_id="a2"), conversation),
    WritePath("tasks.retract_last()", lambda v, c: v.tasks.retract_last("T"), conversation,
              named=False),
    # ------------------------------------------------------------------ patches
    WritePath("tasks.add_text_part", lambda v, c: v.tasks.add_text_part("T", "a2", "two fit"),
              conversation, named=False),
    WritePath("tasks.add_reasoning_part", lambda v, c: v.tasks.add_reasoning_part(
        "T", "a2", "compare prices"), conversation, named=False),
    WritePath("tasks.add_tool_call_part", lambda v, c: v.tasks.add_tool_call_part(
        "T", "a2", ToolCallPart(tool_call_id="c2", tool_name="search")), conversation),
    WritePath("tasks.finish_assistant_message", lambda v, c: v.tasks.finish_assistant_message(
        "T", "a2", tokens_in=30, tokens_out=9), conversation),
    WritePath("tasks.redact (a sealed message, 3-message pages)", lambda v, c: v.tasks.redact(
        "T", "u1", reason="asked"), conversation),
    # ------------------------------------------------------------------ built on the verbs
    # a retry after the checkpoint landed gives the same window; `compressed_now` and the
    # notes say what that attempt did (it found the checkpoint stored)
    WritePath("tasks.context (compression round)", lambda v, c: v.tasks.context(
        "T", strategy="compact_summarization"), long_conversation, named=False,
        result=lambda window: (window.messages, window.tokens, window.checkpoint)),
    WritePath("stream flushes", streamed, conversation, named=False, crash_retry=False),
    # ------------------------------------------------------------------ dialogs
    WritePath("dialogs.create(dialog_id)", lambda v, c: v.dialogs.create(
        "planner", "You plan trips.", dialog_id="D"), crash_answers=(Conflict,),
        two_step_dialog=True),
    WritePath("dialogs.create()", lambda v, c: v.dialogs.create("planner", "You plan."),
              named=False, two_step_dialog=True),
    WritePath("dialogs.put_text", lambda v, c: v.dialogs.put_text("D", "and Porto?"),
              dialog_tree, named=False),
    WritePath("dialogs.fork", lambda v, c: v.dialogs.fork("D", last_n=2), dialog_tree,
              named=False, two_step_dialog=True),
    WritePath("dialogs.delete(cascade)", lambda v, c: v.dialogs.delete("D", cascade=True),
              dialog_tree, crash_answers=(NotFound,), atomic=False),
    WritePath("dialogs.import_dialog", lambda v, c: v.dialogs.import_dialog({
        "dialog_id": "I", "owner": "ann",
        "messages": [{"role": "user", "content": "hi", "id": "x1"}]}),
        crash_answers=(Conflict,), two_step_dialog=True),
    # ------------------------------------------------------------------ operators
    WritePath("backup", backed_up, with_folder),
    WritePath("restore", lambda v, c: restore(v.store, c["path"], as_tenant=v.tenant),
              restorable, atomic=False, result=lambda report: None),
    WritePath("erase (one owner)", lambda v, c: erase(v.store, v.tenant, owner="ann"),
              conversation, atomic=False, result=lambda receipt: None, leftovers=True),
    WritePath("erase (the tenant)", lambda v, c: erase(v.store, v.tenant), dialog_tree,
              atomic=False, result=lambda receipt: None),
    WritePath("retention (erase_before)", lambda v, c: erase_before(
        v.store, v.tenant, before="2100-01-01T00:00:00Z"), conversation, atomic=False,
        result=lambda receipt: None),
]  # fmt: skip

TOTALS: Counter[str] = Counter()


@pytest.fixture
def draws(monkeypatch: pytest.MonkeyPatch) -> Iterator[Draws]:
    with deterministic(monkeypatch) as made:
        yield made


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
async def test_every_fault_at_every_command(path: WritePath, store: Store, stores: Any,
                                            draws: Draws) -> None:  # fmt: skip
    twin = await stores.fresh()
    tally: Tally = await run_matrix(path, store, twin, draws)
    TOTALS.update({"cases": tally.cases, **tally.outcomes})
    assert tally.cases > 0
    assert not tally.failures, "\n".join(tally.failures[:20])
