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

The keyring's verbs (rotation, the re-encryption sweep, shredding) run on a conversation
sealed under a key vault of each case's own; their faults are the database's (the vault is
a directory, and a key provider that does not answer is `KeyProviderUnavailable`, tested
with the providers).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from fault_matrix import Draws, Tally, WritePath, cold, deterministic, patch_adk, run_matrix
from mindstore import PagePolicy, Store, Task, TenantStore
from mindstore.backends.faults import Fault, FaultPlan
from mindstore.backup import backup, erase, restore
from mindstore.backup.retention import erase_before, set_policy
from mindstore.crypto import Keyring
from mindstore.errors import Conflict, NotFound, Unavailable
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


PNG = b"\x89PNG\r\n\x1a\n" + bytes(24)
PROMPTS = {"ask": "Is {city} worth a day?"}


async def half_forked(view: TenantStore) -> dict[str, Any]:
    """A fork whose process stopped before its tree node: `repair` finishes it."""
    await dialog_tree(view)
    child = await view.dialogs.fork("D", last_n=1)
    gone = await view.store.database["dialog_nodes"].delete_one(
        {"tenant": view.tenant, "_id": f"{view.tenant}/{child.id}"})  # fmt: skip
    assert gone.deleted_count == 1
    return {}


def keyring_of(view: TenantStore) -> Keyring:
    assert view.store.keyring is not None
    return view.store.keyring


async def rotated(view: TenantStore) -> dict[str, Any]:
    """The conversation sealed with data key 1, then key 2 added: the sweep re-seals."""
    await conversation(view)
    await keyring_of(view).rotate(view.tenant)
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
        commit=("dialog_nodes",)),
    WritePath("dialogs.create()", lambda v, c: v.dialogs.create("planner", "You plan."),
              named=False, commit=("dialog_nodes",)),
    WritePath("dialogs.put_text", lambda v, c: v.dialogs.put_text("D", "and Porto?"),
              dialog_tree, named=False),
    WritePath("dialogs.fork", lambda v, c: v.dialogs.fork("D", last_n=2), dialog_tree,
              named=False, commit=("dialog_nodes",)),
    WritePath("dialogs.delete(cascade)", lambda v, c: v.dialogs.delete("D", cascade=True),
              dialog_tree, crash_answers=(NotFound,), atomic=False),
    WritePath("dialogs.put_image", lambda v, c: v.dialogs.put_image(
        "D", PNG, caption="the view"), dialog_tree, named=False),
    WritePath("dialogs.put_prompt", lambda v, c: v.dialogs.put_prompt(
        "D", "ask", {"city": "Porto"}, registry=PROMPTS), dialog_tree, named=False),
    WritePath("dialogs.repair (a fork left without its node)", lambda v, c: v.dialogs.repair(),
              half_forked, atomic=False, result=lambda found: None),
    WritePath("dialogs.import_dialog", lambda v, c: v.dialogs.import_dialog({
        "dialog_id": "I", "owner": "ann",
        "messages": [{"role": "user", "content": "hi", "id": "x1"}]}),
        crash_answers=(Conflict,), commit=("dialog_nodes",)),
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
    WritePath("retention.set_policy", lambda v, c: set_policy(
        v.store, v.tenant, max_age_days=30), conversation),
    # ------------------------------------------------------------------ the keyring's verbs
    # (a conversation sealed under a key vault; a retry's count differs from the first
    # attempt's when that one landed: what is compared is the stored state)
    WritePath("keys.rotate", lambda v, c: keyring_of(v).rotate(v.tenant), conversation,
              named=False, keyring=True),
    WritePath("keys.reencrypt (after a rotation)", lambda v, c: keyring_of(v).reencrypt(
        v.tenant), rotated, keyring=True, atomic=False, result=lambda swept: None),
    WritePath("keys.shred", lambda v, c: keyring_of(v).shred(v.tenant), conversation,
              keyring=True, atomic=False, result=lambda deleted: None),
]  # fmt: skip

# ------------------------------------------------------------------ integrations' saves
THREAD = {"configurable": {"thread_id": "th", "checkpoint_ns": ""}}


def checkpoint(number: int, texts: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A LangGraph checkpoint of a `messages` channel holding `texts`, and its metadata."""
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.base import empty_checkpoint

    made = empty_checkpoint()
    made["id"] = f"1f000000-0000-6000-8000-{number:012d}"
    made["ts"] = "2026-01-01T00:00:00+00:00"
    made["channel_values"] = {"messages": [HumanMessage(t, id=f"lc{i}") for i, t in
                                           enumerate(texts)]}  # fmt: skip
    made["channel_versions"] = {"messages": number}
    return made, {"source": "loop", "step": number, "parents": {}}


async def langgraph_thread(view: TenantStore) -> dict[str, Any]:
    from mindstore.integrations.langgraph import MindstoreSaver

    first, meta = checkpoint(1, ["hello"])
    stored = await MindstoreSaver(view).aput(THREAD, first, meta, {"messages": 1})
    second = checkpoint(2, ["hello", "a hotel?"])
    return {"config": stored, "second": second}


def langgraph_put(view: TenantStore, context: dict[str, Any]) -> Any:
    from mindstore.integrations.langgraph import MindstoreSaver

    made, meta = context["second"]
    return MindstoreSaver(view).aput(context["config"], made, meta, {"messages": 2})


def langgraph_put_writes(view: TenantStore, context: dict[str, Any]) -> Any:
    from langchain_core.messages import AIMessage

    from mindstore.integrations.langgraph import MindstoreSaver

    writes = [("messages", [AIMessage("two fit", id="ai1")]), ("step", 3)]
    return MindstoreSaver(view).aput_writes(context["config"], writes, "task-1", "")


def agents_items() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "Weather in Oslo?"},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather",
         "arguments": "{\"city\": \"Oslo\"}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "-3C"},
    ]  # fmt: skip


def agents_add_items(view: TenantStore, context: dict[str, Any]) -> Any:
    from mindstore.integrations.openai_agents import MindstoreSession

    return MindstoreSession("chat", view, owner="ann").add_items(context["items"])


def langchain_add(view: TenantStore, context: dict[str, Any]) -> Any:
    from mindstore.integrations.langchain import MindstoreChatMessageHistory

    history = MindstoreChatMessageHistory("chat", view, owner="ann")
    return history.aadd_messages(context["messages"])


def langchain_messages() -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage

    return [HumanMessage("a hotel?", id="h1"), AIMessage("two fit", id="a1")]


def pydantic_messages() -> list[Any]:
    from pydantic_ai.messages import ModelRequest, ModelResponse, UserPromptPart
    from pydantic_ai.messages import TextPart as ModelText

    at = datetime(2026, 1, 1, tzinfo=UTC)
    return [ModelRequest(parts=[UserPromptPart("a hotel?", timestamp=at)]),
            ModelResponse(parts=[ModelText("two fit")], model_name="m", timestamp=at)]  # fmt: skip


def pydantic_save(view: TenantStore, context: dict[str, Any]) -> Any:
    from mindstore.integrations.pydantic_ai import save_messages

    return save_messages(view, "chat", context["messages"])


async def adk_session(view: TenantStore) -> dict[str, Any]:
    from google.adk.events import Event
    from google.genai import types

    from mindstore.integrations.adk import MindstoreSessionService

    service = MindstoreSessionService(view)
    await service.create_session(app_name="trips", user_id="ann", session_id="s1")
    said = types.Content(role="user", parts=[types.Part(text="a hotel?")])
    event = Event(id="ev1", invocation_id="inv1", author="user", timestamp=1_700_000_000.5,
                  content=said)  # fmt: skip
    return {"event": event}


def adk_append(view: TenantStore, context: dict[str, Any]) -> Any:
    from mindstore.integrations.adk import MindstoreSessionService

    async def run() -> Any:
        service = MindstoreSessionService(view)
        session = await service.get_session(app_name="trips", user_id="ann", session_id="s1")
        assert session is not None
        event = await service.append_event(session, context["event"].model_copy(deep=True))
        return event.id

    return run()


def saver(view: TenantStore) -> Any:
    from mindstore.integrations.langgraph import MindstoreSaver

    return MindstoreSaver(view)


def agents_session(view: TenantStore) -> Any:
    from mindstore.integrations.openai_agents import MindstoreSession

    return MindstoreSession("chat", view, owner="ann")


def chat_history(view: TenantStore) -> Any:
    from mindstore.integrations.langchain import MindstoreChatMessageHistory

    return MindstoreChatMessageHistory("chat", view, owner="ann")


async def agents_chat(view: TenantStore) -> dict[str, Any]:
    await agents_session(view).add_items(agents_items())
    return {}


async def langchain_chat(view: TenantStore) -> dict[str, Any]:
    await chat_history(view).aadd_messages(langchain_messages())
    return {}


def adk_delete(view: TenantStore, context: dict[str, Any]) -> Any:
    from mindstore.integrations.adk import MindstoreSessionService

    return MindstoreSessionService(view).delete_session(
        app_name="trips", user_id="ann", session_id="s1")  # fmt: skip


INTEGRATIONS = [
    WritePath("langgraph put", langgraph_put, langgraph_thread, commit=("langgraph_checkpoints",)),
    WritePath("langgraph put_writes", langgraph_put_writes, langgraph_thread),
    WritePath(
        "langgraph delete_thread",
        lambda v, c: saver(v).adelete_thread("th"),
        langgraph_thread,
        atomic=False,
    ),
    WritePath(
        "langgraph copy_thread",
        lambda v, c: saver(v).acopy_thread("th", "th2"),
        langgraph_thread,
        atomic=False,
    ),
    WritePath("openai_agents add_items", agents_add_items, arguments(items=agents_items)),
    WritePath(
        "openai_agents pop_item",
        lambda v, c: agents_session(v).pop_item(),
        agents_chat,
        named=False,
    ),
    WritePath(
        "openai_agents clear_session",
        lambda v, c: agents_session(v).clear_session(),
        agents_chat,
        crash_answers=(NotFound,),
    ),
    WritePath("langchain add_messages", langchain_add, arguments(messages=langchain_messages)),
    WritePath(
        "langchain clear",
        lambda v, c: chat_history(v).aclear(),
        langchain_chat,
        crash_answers=(NotFound,),
    ),
    WritePath("pydantic_ai save_messages", pydantic_save, arguments(messages=pydantic_messages)),
    WritePath("adk append_event", adk_append, adk_session),
    WritePath("adk delete_session", adk_delete, adk_session, atomic=False),
]

TOTALS: Counter[str] = Counter()


@pytest.fixture(scope="module", autouse=True)
def matrix_report() -> Iterator[None]:
    """With `MINDSTORE_FAULT_MATRIX_REPORT=<file>`, the matrix's size and outcomes are
    added to that file (one JSON line per run of this module)."""
    yield
    target = os.environ.get("MINDSTORE_FAULT_MATRIX_REPORT")
    if target and TOTALS:
        page = os.environ.get("MINDSTORE_PAGE_MESSAGES", "default")
        with open(target, "a") as report:
            report.write(json.dumps({"page_messages": page, **TOTALS}) + "\n")


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


@pytest.mark.parametrize("path", INTEGRATIONS, ids=lambda p: p.name)
async def test_every_fault_at_every_command_of_an_integrations_save(
    path: WritePath, store: Store, stores: Any, draws: Draws, monkeypatch: pytest.MonkeyPatch
) -> None:
    extra = {"langgraph": "langgraph", "openai_agents": "agents", "langchain": "langchain_core",
             "pydantic_ai": "pydantic_ai", "adk": "google.adk"}[path.name.split()[0]]  # fmt: skip
    pytest.importorskip(extra)
    if extra == "google.adk":
        patch_adk(monkeypatch, draws)
    await test_every_fault_at_every_command(path, store, stores, draws)


# ------------------------------------------------------------------ across processes, fresh ids
async def test_a_long_create_crashed_mid_pages_is_finished_by_another_process(
    store: Store,
) -> None:
    """The next process draws its own ids: the create's config message is named by the
    task id, so its pages are the crashed create's, kept, and the insert lands (a random
    config id made the pages another create's: `Conflict` for up to an hour)."""
    if store.page_policy is None or store.page_policy.page_messages > 4:
        store.page_policy = type(store.page_policy or PagePolicy())(page_messages=3)
    messages = history(9)
    plan = FaultPlan(Fault(1, "crash_after", writes_only=True))  # the second page written
    crashed = cold(store, plan).scoped("acme")
    running = asyncio.ensure_future(
        crashed.tasks.create(task_id="L", config=CONFIG, messages=messages)
    )
    await asyncio.wait_for(plan.crashed.wait(), 10)
    assert await store.backend.database["task_pages"].count_documents({"tenant": "acme"}) == 2
    record = (
        await cold(store).scoped("acme").tasks.create(task_id="L", config=CONFIG, messages=messages)
    )
    assert record.seq == 10
    stored = await store.scoped("acme").tasks.messages("L")
    assert [m.id for m in stored[1:]] == [m.id for m in messages]
    running.cancel()


async def test_an_entry_retried_by_another_process_writes_the_same_messages(
    store: Store,
) -> None:
    """A sub-task entry named by its entry id names its config and context messages from
    it: a retry from another process (fresh ids) that finds nothing stored writes what
    the first attempt meant to, and one that finds it stored writes nothing."""
    first, second = store.scoped("one"), store.scoped("two")
    for view in (first, second):
        await view.tasks.create(task_id="T", config=CONFIG)
    entry = ([TextPart(text="compare two")], SUB)
    written = await first.tasks.add_task_entry("T", *entry, entry_id="e1")
    plan = FaultPlan(Fault(0, "before", writes_only=True))
    with pytest.raises(Unavailable):
        await cold(store, plan).scoped("two").tasks.add_task_entry("T", *entry, entry_id="e1")
    await cold(store).scoped("two").tasks.add_task_entry("T", *entry, entry_id="e1")
    await cold(store).scoped("two").tasks.add_task_entry("T", *entry, entry_id="e1")  # again
    ids = [[m.id for m in await view.tasks.messages("T")][1:] for view in (first, second)]
    assert ids[0] == ids[1] and ids[0].count(written.id) == 1 and len(ids[0]) == 3
