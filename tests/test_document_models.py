"""The Beanie document models as an application's typed query surface (docs/data-model.md,
"Reading with Beanie"): `TaskDoc.find(...)` and the other models on the suite's backend,
the lean stored form and paged messages read back typed as the task repository reads
them, Beanie loaded at connect and not at ``import mindstore``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest

from conftest import StoreFactory
from mindstore import PagePolicy, Store, TaskState
from mindstore.collection_names import DIALOG_NODES, LANGGRAPH_CHECKPOINTS, PAYLOADS, TASKS
from mindstore.document_models import (
    DOCUMENT_MODELS,
    DialogNodeDoc,
    PayloadDoc,
    TaskDoc,
    TaskPageDoc,
    document_models,
)
from mindstore.ids import task_key
from mindstore.integrations.langgraph_documents import LangGraphCheckpointDoc
from mindstore.model.messages import AssistantMessage, message_to_dict
from mindstore.model.parts import TaskConfigPart, TextPart, ToolCallPart, ToolMetadata
from paging_fixtures import half_done_seal, unfolded

SMALL = PagePolicy(page_messages=4, page_bytes=4096)
CONFIG = TaskConfigPart(model_name="openai/gpt-4o", tool_metadata=[ToolMetadata(name="search")])


def dicts(messages: list[Any]) -> list[dict[str, Any]]:
    return [message_to_dict(message) for message in messages]


async def conversation(tasks: Any, *, owner_turns: int = 3) -> str:
    """A task whose stored form differs from the caller's: escaped keys, an escaped
    `mindstore:` string, a tool call with its flags, an answer, defaults left out."""
    tid = (await tasks.create(config=CONFIG, title="Trip", metadata={"$ref": "#/a", "a.b": 1})).id
    await tasks.add_human_message(tid, "mindstore:not a marker", message_id="u0")
    asked = await tasks.add_assistant_message(tid, message_id="a0")
    call = ToolCallPart(tool_call_id="c0", tool_name="search", args={"$schema": {"x.y": [1]}})
    await tasks.add_tool_call_part(tid, asked.id, call)
    await tasks.answer_tool_call(tid, "c0", {"hits": ["Lisbon"]}, message_id="r0")
    for turn in range(owner_turns):
        await tasks.add_human_message(tid, f"turn {turn}", message_id=f"h{turn}")
        await tasks.add_message(
            tid,
            AssistantMessage(
                id=f"m{turn}", content=[TextPart(text=f"answer {turn}")], tokens_in=10 + turn
            ),
        )
    return tid


# ---------------------------------------------------------------------- TaskDoc.find
async def test_find_returns_one_tenants_tasks_with_typed_fields(store: Store) -> None:
    acme, beta = store.scoped("acme").tasks, store.scoped("beta").tasks
    tid = await conversation(acme)
    done = (await acme.create(title="done", owner="bob")).id
    await acme.set_state(done, TaskState.completed)
    await beta.create(title="other tenant")

    found = await TaskDoc.find(TaskDoc.tenant == "acme").sort(-TaskDoc.updated_at).to_list()
    assert {doc.task_id for doc in found} == {done, tid}  # beta's task is not acme's
    times = [doc.updated_at for doc in found]
    assert times == sorted(times, reverse=True)
    completed = await TaskDoc.find(
        TaskDoc.tenant == "acme", TaskDoc.state == TaskState.completed
    ).to_list()
    assert [doc.task_id for doc in completed] == [done]
    assert await TaskDoc.find(TaskDoc.tenant == "acme", TaskDoc.owner == "bob").count() == 1

    doc = next(doc for doc in found if doc.task_id == tid)
    record = await acme.get(tid)
    assert doc.id == task_key("acme", tid) and doc.state is TaskState.running
    assert doc.created_at == record.created_at and doc.created_at.tzinfo is not None
    assert doc.created_at.utcoffset() == UTC.utcoffset(None)
    assert (doc.title, doc.version, doc.seq) == ("Trip", record.version, record.seq)
    assert doc.header() == await acme.header(tid)  # compact fields, tail from the last message
    assert doc.header().usage.tokens_in == sum(10 + turn for turn in range(3))
    assert doc.usage == {"in": doc.header().usage.tokens_in}  # as stored: compact
    assert doc.caller_metadata() == record.metadata == {"$ref": "#/a", "a.b": 1}
    assert doc.metadata != record.metadata  # as stored: keys escaped


async def test_read_messages_is_what_the_repository_returns(store: Store) -> None:
    acme = store.scoped("acme").tasks
    tid = await conversation(acme)
    doc = await TaskDoc.get(task_key("acme", tid))
    assert doc is not None
    stored_last = doc.messages[-1]
    assert "depth" not in stored_last and "task_id" not in stored_last  # the lean form
    everything = await acme.messages(tid)
    assert dicts(await doc.read_messages()) == dicts(everything[doc.sealed :])  # open page
    messages = await doc.read_history()
    assert dicts(messages) == dicts(everything)
    assert messages[1].role == "user" and messages[1].text() == "mindstore:not a marker"
    call = messages[2].content[0]
    assert isinstance(call, ToolCallPart) and call.args == {"$schema": {"x.y": [1]}}
    assert call.is_loading is False  # answered: the patched flag, typed
    assert all(message.task_id == tid for message in messages)  # filled back


async def test_large_values_come_back_from_payloads(stores: StoreFactory, store: Store) -> None:
    small = stores.sibling(offload_threshold=1024)  # same database, Beanie's binding kept
    acme = small.scoped("acme").tasks
    tid = (await acme.create()).id
    big = "x" * 5000
    await acme.add_human_message(tid, big, message_id="big")
    doc = await TaskDoc.find_one(TaskDoc.tenant == "acme", TaskDoc.id == task_key("acme", tid))
    assert doc is not None
    assert doc.messages[-1]["content"][0]["text"].startswith("mindstore:payload:")
    assert await PayloadDoc.find(PayloadDoc.tenant == "acme", PayloadDoc.task_id == tid).count()
    messages = await doc.read_messages()
    assert messages[-1].text() == big
    assert dicts(messages) == dicts(await acme.messages(tid))


async def test_a_marker_of_another_tasks_payload_is_not_resolved(store: Store) -> None:
    """Payloads resolve against the task's own (tenant and task id in the query): a stored
    document naming another task's payload, written by anything but mindstore, keeps it."""
    small = Store(store.backend, offload_threshold=1024)
    acme = small.scoped("acme").tasks
    owner = (await acme.create()).id
    await acme.add_human_message(owner, "s" * 5000, message_id="secret")
    payload = await PayloadDoc.find_one(PayloadDoc.task_id == owner)
    assert payload is not None
    marker = f"mindstore:payload:{payload.id}"
    thief = (await acme.create()).id
    await acme.add_human_message(thief, "placeholder", message_id="t0")
    await store.database[TASKS].update_one(
        {"_id": task_key("acme", thief)}, {"$set": {"messages.0.content.0.text": marker}}
    )
    doc = await TaskDoc.get(task_key("acme", thief))
    assert doc is not None
    assert (await doc.read_messages())[0].text() == marker


# ---------------------------------------------------------------------- paged tasks
async def paged_conversation(store: Store) -> tuple[Any, str]:
    acme = Store(store.backend, page_policy=SMALL).scoped("acme").tasks
    tid = await conversation(acme, owner_turns=8)
    return acme, tid


async def test_read_history_reads_sealed_pages_then_the_open_page(store: Store) -> None:
    acme, tid = await paged_conversation(store)
    doc = await TaskDoc.get(task_key("acme", tid))
    assert doc is not None and doc.pages >= 2 and doc.sealed > 0
    assert len(doc.messages) == doc.seq - doc.sealed  # the open page only
    everything = await acme.messages(tid)
    assert dicts(await doc.read_messages()) == dicts(everything[doc.sealed :])
    assert dicts(await doc.read_history()) == dicts(everything)
    mine = (TaskPageDoc.tenant == "acme", TaskPageDoc.task == doc.id)
    pages = await TaskPageDoc.find(*mine).to_list()
    assert sorted(page.page for page in pages) == list(range(doc.pages))
    assert sum(len(page.messages) for page in pages) == doc.sealed


async def test_read_history_applies_pending_changes_to_sealed_messages(store: Store) -> None:
    acme = Store(store.backend, page_policy=SMALL).scoped("acme").tasks
    tid = (await acme.create(config=CONFIG)).id
    asked = await acme.add_assistant_message(tid, message_id="a0")
    await acme.add_tool_call_part(tid, asked.id, ToolCallPart(tool_call_id="c0", tool_name="s"))
    for turn in range(12):
        await acme.add_human_message(tid, f"grow {turn}", message_id=f"g{turn}")
    with unfolded(acme):  # the change to the sealed call stays pending, its page unfolded
        await acme.answer_tool_call(tid, "c0", {"n": 1}, message_id="r0")
    doc = await TaskDoc.get(task_key("acme", tid))
    assert doc is not None and [entry["id"] for entry in doc.pending][:1] == ["a0"]
    page = await TaskPageDoc.find_one(TaskPageDoc.task == doc.id, TaskPageDoc.page == 0)
    assert page is not None and page.messages[1]["content"][0]["is_loading"] is True
    history = await doc.read_history()
    assert history[1].content[0].is_loading is False  # type: ignore[union-attr]
    assert dicts(history) == dicts(await acme.messages(tid))


async def test_read_history_ignores_a_half_done_seal(store: Store) -> None:
    acme, tid = await paged_conversation(store)
    left = await half_done_seal(store, SMALL, task_key("acme", tid))
    doc = await TaskDoc.get(task_key("acme", tid))
    assert doc is not None and left and all(page["page"] >= doc.pages for page in left)
    assert dicts(await doc.read_history()) == dicts(await acme.messages(tid))


# ---------------------------------------------------------------------- the other models
async def test_dialog_nodes_and_payloads_are_queried_by_their_models(store: Store) -> None:
    acme = store.scoped("acme")
    root = (await acme.tasks.create()).id
    await acme.tasks.add_human_message(root, "hello", message_id="h")
    child = await acme.dialogs.fork(root, last_n=1)
    nodes = await DialogNodeDoc.find(
        DialogNodeDoc.tenant == "acme", DialogNodeDoc.parent_id == root
    ).to_list()
    assert [node.id for node in nodes] == [task_key("acme", child.id)]
    assert nodes[0].root_id == root and nodes[0].depth == 1
    assert await DialogNodeDoc.find(DialogNodeDoc.tenant == "beta").count() == 0


async def test_connect_creates_every_models_indexes(store: Store) -> None:
    for model in document_models():
        names = set(await store.database[model.Settings.name].index_information())
        wanted = {index.document["name"] for index in getattr(model.Settings, "indexes", [])}
        assert wanted <= names, model.Settings.name
    assert LangGraphCheckpointDoc in document_models()  # registered by its module
    assert LangGraphCheckpointDoc not in DOCUMENT_MODELS  # the core does not import it
    assert {TASKS, DIALOG_NODES, PAYLOADS, LANGGRAPH_CHECKPOINTS} <= {
        model.Settings.name for model in document_models()
    }


async def test_the_models_follow_the_most_recent_connect(store: Store, store_factory: Any) -> None:
    """Beanie binds a model class to one database per process (docs/data-model.md)."""
    await store.scoped("acme").tasks.create(title="first")
    other = await store_factory()
    assert await TaskDoc.find(TaskDoc.tenant == "acme").count() == 0  # `other`'s database
    await other.scoped("acme").tasks.create(title="second")
    assert [doc.title for doc in await TaskDoc.find(TaskDoc.tenant == "acme").to_list()] == [
        "second"
    ]


# ---------------------------------------------------------------------- loading Beanie
def run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    return done.stdout.strip()


def test_import_mindstore_does_not_load_beanie() -> None:
    assert run("import sys, mindstore; print('beanie' in sys.modules)") == "False"
    names = "from mindstore.documents import TASKS, task_document, header_from_document"
    assert run(f"import sys; {names}; print('beanie' in sys.modules)") == "False"


def test_the_former_module_still_exports_the_models() -> None:
    from mindstore import documents

    assert documents.TaskDoc is TaskDoc
    assert documents.LangGraphCheckpointDoc is LangGraphCheckpointDoc
    assert document_models() == documents.DOCUMENT_MODELS
    with pytest.raises(AttributeError, match="NoSuchDoc"):
        documents.NoSuchDoc  # noqa: B018


def test_the_documented_example_runs() -> None:
    doc = (Path(__file__).resolve().parent.parent / "docs" / "data-model.md").read_text()
    body = doc.split("\n## Reading with Beanie\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", body, re.S)
    assert len(blocks) == 1, "one runnable example"
    exec(
        compile(blocks[0], "docs/data-model.md (Reading with Beanie)", "exec"),
        {"__name__": "__main__"},
    )
