"""`mindstore export` and `mindstore.exports`: every conversation out, whole, in each format.

Oracles that do not share the export's code: each provider payload is read back by
`mindstore.formats`' importer and exported again (the formats' own round trip, docs/
formats.md); the jsonl lines are compared with the messages `tasks.read_range` returns;
the Mind Map lines are read by `mindstore.Task`; the subject export's manifest is checked
by hashing the files it names.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import mindstore
from mindstore.backends.snapshot import save_snapshot
from mindstore.cli import app
from mindstore.crypto import Keyring, LocalMasterKey
from mindstore.errors import NotFound, ValidationError
from mindstore.exports import ExportFormat, export_lines, export_subject
from mindstore.exports import reader as export_reader
from mindstore.formats import (
    from_anthropic,
    from_gemini,
    from_openai_chat,
    from_responses,
    to_anthropic,
    to_gemini,
    to_openai_chat,
    to_responses,
)
from mindstore.integrations.langgraph_store import MindstoreStore
from mindstore.model.messages import MESSAGE_LIST_ADAPTER, Usage
from mindstore.store import Store, TenantStore

runner = CliRunner()

ROUND_TRIPS = {
    "openai-chat": (from_openai_chat, to_openai_chat),
    "openai-responses": (from_responses, to_responses),
    "anthropic": (from_anthropic, to_anthropic),
    "gemini": (from_gemini, to_gemini),
}


async def conversation(view: TenantStore, task_id: str, turns: list[str], owner: str) -> None:
    """A chat with a system prompt, turns, a tool call and its result, and usage."""
    scoped = view.store.scoped(view.tenant, owner)
    await scoped.tasks.create(title=f"about {task_id}", task_id=task_id)
    chat: list[dict[str, Any]] = [{"role": "system", "content": "You are a travel agent."}]
    chat += [
        {"role": "user" if i % 2 == 0 else "assistant", "content": text}
        for i, text in enumerate(turns)
    ]
    chat += [
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": f"call-{task_id}", "type": "function",
            "function": {"name": "lookup", "arguments": json.dumps({"q": turns[0]})},
        }]},
        {"role": "tool", "tool_call_id": f"call-{task_id}", "content": "found it"},
    ]  # fmt: skip
    messages = from_openai_chat(chat)
    for message in messages:
        if message.role == "assistant":
            message.usage = Usage(input_tokens=12, output_tokens=5)
    await scoped.tasks.add_messages(task_id, messages)


async def seed(store: Store) -> TenantStore:
    acme = store.scoped("acme")
    await conversation(acme, "trip", ["Book Lisbon", "Which dates?", "May 3 to 6"], "alice")
    await conversation(acme, "support", ["My order is late", "Sorry, checking"], "bob")
    await conversation(acme, "code", ["Fix the failing test", "Done"], "alice")
    await conversation(store.scoped("other"), "trip", ["secret of other"], "alice")
    return acme


async def lines(view: TenantStore, fmt: str, **kw: Any) -> list[dict[str, Any]]:
    return [line async for line in export_lines(view, fmt, **kw)]


@pytest.mark.parametrize("fmt", [f.value for f in ExportFormat])
async def test_each_format_carries_every_conversation_and_reads_back(
    store: Store, fmt: str
) -> None:
    acme = await seed(store)
    out = await lines(acme, fmt)
    assert sorted(line["task"]["id"] for line in out) == ["code", "support", "trip"]
    for line in out:
        stored = await acme.tasks.read_range(line["task"]["id"])
        assert line["format"] == fmt and line["task"]["tenant"] == "acme"
        if fmt == "jsonl":
            assert MESSAGE_LIST_ADAPTER.validate_python(line["messages"]) == stored
        elif fmt == "mind-map":
            task = mindstore.Task.model_validate(line["task_document"])
            assert task.messages == stored and task.id == line["task"]["id"]
        else:
            read, write = ROUND_TRIPS[fmt]
            assert write(read(line["payload"])) == line["payload"]
            assert [m["id"] for m in line["messages"]] == [m.id for m in stored]
            assert [m.get("usage") for m in line["messages"]] == [
                None if m.usage is None else m.usage.model_dump(mode="json") for m in stored
            ]
        assert json.loads(json.dumps(line)) == line  # plain JSON throughout


async def test_scope_owner_and_named_tasks(store: Store) -> None:
    acme = await seed(store)
    alice = await lines(acme, "jsonl", owner="alice")
    assert sorted(line["task"]["id"] for line in alice) == ["code", "trip"]
    assert all(line["task"]["owner"] == "alice" for line in alice)
    scoped = await lines(store.scoped("acme", "bob"), "jsonl")
    assert [line["task"]["id"] for line in scoped] == ["support"]
    named = await lines(acme, "jsonl", task_ids=["support", "trip", "support"])
    assert [line["task"]["id"] for line in named] == ["support", "trip"]
    with pytest.raises(NotFound):  # another owner's task, from an owner-scoped view
        await lines(store.scoped("acme", "bob"), "jsonl", task_ids=["trip"])
    texts = json.dumps(await lines(acme, "jsonl"))
    assert "secret of other" not in texts  # another tenant never


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"fmt": "csv"}, "format"),
        ({"fmt": "jsonl", "owner": "$where"}, "owner"),
        ({"fmt": "jsonl", "task_ids": ["a/b"]}, "task id"),
        ({"fmt": "jsonl", "task_ids": [{"$gt": ""}]}, "task id"),
    ],
)
async def test_hostile_arguments_are_typed_errors(
    store: Store, kwargs: dict[str, Any], named: str
) -> None:
    acme = await seed(store)
    with pytest.raises(ValidationError, match=named):
        await lines(acme, **kwargs)


async def test_paging_reads_every_task_and_message_in_windows(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    acme = await seed(store)
    long_turns = [f"turn {i}" for i in range(23)]
    await conversation(acme, "long", long_turns, "carol")
    whole = {line["task"]["id"]: line for line in await lines(acme, "jsonl")}
    monkeypatch.setattr(export_reader, "TASKS_PAGE", 1)
    monkeypatch.setattr(export_reader, "MESSAGES_CHUNK", 2)
    paged = {line["task"]["id"]: line for line in await lines(acme, "jsonl")}
    assert paged == whole and len(paged["long"]["messages"]) == 1 + 23 + 2


@settings(max_examples=15, deadline=None)
@given(texts=st.lists(st.text(min_size=1, max_size=40), min_size=1, max_size=6))
def test_jsonl_keeps_any_text_whole(texts: list[str]) -> None:
    async def body() -> None:
        store = await mindstore.connect("embedded")
        try:
            acme = store.scoped("acme")
            await acme.tasks.create(task_id="t")
            for text in texts:
                await acme.tasks.add_human_message("t", text)
            (line,) = await lines(acme, "jsonl")
            got = MESSAGE_LIST_ADAPTER.validate_python(json.loads(json.dumps(line))["messages"])
            assert [m.text() for m in got] == texts
        finally:
            await store.close()

    asyncio.run(body())


async def test_subject_export_gathers_the_owner_and_its_manifest_checks(
    store: Store, tmp_path: Path
) -> None:
    acme = await seed(store)
    agent = await store.scoped("acme", "alice").agents.get("alice")
    await agent.open("main")
    for owner in ("alice", "bob"):  # a LangGraph-store memory each
        memories = MindstoreStore(store.scoped("acme", owner))
        await memories.aput(("memories", owner), "food", {"likes": f"{owner}'s favourite"})
    folder = tmp_path / "alice"
    done = await export_subject(store, "acme", "alice", folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest == json.loads(json.dumps(done.manifest, sort_keys=True))
    for name, facts in manifest["files"].items():
        data = (folder / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == facts["sha256"]
        assert len(data) == facts["bytes"] and data.count(b"\n") == facts["records"]
    owners = {
        json.loads(row)["task"]["owner"]
        for row in (folder / "conversations.jsonl").read_text().splitlines()
    }
    assert owners == {"alice"}
    assert manifest["files"]["agents.jsonl"]["records"] == 1
    (memory,) = [json.loads(r) for r in (folder / "memories.jsonl").read_text().splitlines()]
    assert memory["namespace"] == ["memories", "alice"] and memory["key"] == "food"
    assert memory["value"] == {"likes": "alice's favourite"}
    everything = b"".join(p.read_bytes() for p in folder.iterdir())
    assert b"My order is late" not in everything and b"secret of other" not in everything
    listed = {record.id for record in (await acme.tasks.list(owner="alice")).items}
    exported = {
        json.loads(row)["task"]["id"]
        for row in (folder / "conversations.jsonl").read_text().splitlines()
    }
    assert exported == listed and {"trip", "code"} < listed  # and the agent's dialog
    with pytest.raises(ValidationError, match="folder"):
        await export_subject(store, "acme", "alice", folder)  # never mixes with old files


# -------------------------------------------------------------------------- the CLI
@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    path = tmp_path / "store.gz"

    async def body() -> None:
        store = await mindstore.connect("embedded")
        await seed(store)
        await save_snapshot(store.database, path)
        await store.close()

    asyncio.run(body())
    return path


def invoke(*args: str) -> Any:
    return runner.invoke(app, list(args))


def test_cli_streams_a_line_per_conversation_and_writes_files(
    data_file: Path, tmp_path: Path
) -> None:
    before = data_file.read_bytes()
    result = invoke("--data", str(data_file), "export", "--tenant", "acme", "-f", "anthropic")
    assert result.exit_code == 0, result.output
    rows = [json.loads(r) for r in result.stdout.splitlines()]
    assert sorted(r["task"]["id"] for r in rows) == ["code", "support", "trip"]
    folder = tmp_path / "files"
    result = invoke("--data", str(data_file), "export", "--tenant", "acme", "--owner", "alice",
                    "--out", str(folder))  # fmt: skip
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in folder.iterdir()) == ["code.json", "trip.json"]
    result = invoke("--data", str(data_file), "export", "--tenant", "acme", "-f", "xml")
    assert result.exit_code == 2
    result = invoke("--data", str(data_file), "export", "--tenant", "acme", "--task", "nope")
    assert result.exit_code == 3  # NotFound
    result = invoke("--data", str(data_file), "export", "--tenant", "acme", "--subject")
    assert result.exit_code == 2 and "--subject needs --owner and --out" in result.output
    subject = tmp_path / "subject"
    result = invoke("--data", str(data_file), "export", "--tenant", "acme", "--owner", "bob",
                    "--subject", "--out", str(subject))  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads((subject / "manifest.json").read_text())["owner"] == "bob"
    assert data_file.read_bytes() == before  # an export only reads


def test_cli_a_sealed_tenant_needs_its_keyring_and_a_shredded_one_is_refused(
    tmp_path: Path,
) -> None:
    key_file = tmp_path / "master.key"
    key_file.write_text(os.urandom(32).hex())
    path = tmp_path / "sealed.gz"

    async def body() -> None:
        store = await mindstore.connect(
            "embedded", keyring=Keyring(LocalMasterKey.from_file(key_file))
        )
        acme = store.scoped("acme")
        await acme.tasks.create(task_id="t1")
        await acme.tasks.add_human_message("t1", "sealed words")
        await save_snapshot(store.database, path)
        await store.close()

    asyncio.run(body())
    base = ["--data", str(path)]
    result = invoke(*base, "export", "--tenant", "acme")
    assert result.exit_code != 0 and "sealed words" not in result.stdout
    keyed = [*base, "--master-key", str(key_file)]
    result = invoke(*keyed, "export", "--tenant", "acme")
    assert result.exit_code == 0, result.output
    assert "sealed words" in result.stdout
    shred = invoke(*base, "keys", "shred", "--tenant", "acme", "--yes")
    assert shred.exit_code == 0, shred.output
    result = invoke(*keyed, "export", "--tenant", "acme")
    assert result.exit_code == 17 and "sealed words" not in result.stdout  # KeyShredded
