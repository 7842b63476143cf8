"""`mindstore tasks list | show | messages | tree` through typer's CliRunner on an embedded
data file (`--data`), checked against what the seed wrote through the library."""

from __future__ import annotations

import asyncio
import csv
import io
import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import mindstore
from mindstore.backends.snapshot import save_snapshot
from mindstore.cli import app
from mindstore.model.parts import TaskConfigPart, TextPart, ToolCallPart, ToolMetadata

runner = CliRunner()

CONFIG = TaskConfigPart(
    model_name="m", tool_metadata=[ToolMetadata(name="research", is_task_entry=True)]
)
LONG_TEXT = "lorem ipsum " * 20


async def _assistant(tasks: Any, task_id: str, text: str | None, tokens_in: int, tokens_out: int,
                     cost: float, tool_call: str | None = None) -> None:  # fmt: skip
    message = await tasks.add_assistant_message(task_id)
    if text:
        await tasks.add_text_part(task_id, message.id, text)
    if tool_call:
        await tasks.add_tool_call_part(
            task_id, message.id, ToolCallPart(tool_call_id=tool_call, tool_name="research")
        )
    await tasks.finish_assistant_message(task_id, message.id, tokens_in=tokens_in,
                                         tokens_out=tokens_out, cost=cost)  # fmt: skip


async def _research_task(tasks: Any) -> str:
    """A task with usage on three assistant turns, one of them inside a finished sub-task."""
    task = await tasks.create(owner="alice", title="research", config=CONFIG)
    await tasks.add_human_message(task.id, "hello")
    await _assistant(tasks, task.id, "hi", 10, 5, 0.5)
    await _assistant(tasks, task.id, None, 3, 2, 0.25, tool_call="c1")
    await tasks.add_task_entry(task.id, [TextPart(text="look it up")], CONFIG, entry_id="entry1")
    await tasks.add_human_message(task.id, LONG_TEXT)
    await _assistant(tasks, task.id, "found", 7, 1, 0.125)
    await tasks.add_task_exit(task.id, [TextPart(text="found it")])
    await tasks.add_human_message(task.id, "thanks")
    return task.id


async def _seed(path: Path) -> dict[str, Any]:
    store = await mindstore.connect("embedded", database="cli_tasks")
    try:
        acme, beta = store.scoped("acme"), store.scoped("beta")
        research = await _research_task(acme.tasks)
        chat = await acme.tasks.create(owner="bob", title="chat", content="question")
        await acme.tasks.set_state(chat.id, "completed")
        note = await acme.tasks.create(owner="alice", title="note", config=CONFIG)
        fork = await acme.dialogs.fork(research, last_n=2)
        other = await beta.tasks.create(owner="zed", title="beta's task", content="hi from beta")
        messages = await acme.tasks.messages(research)
        facts = {
            "research": research, "chat": chat.id, "note": note.id, "fork": fork.id,
            "other": other.id, "fork_seq": fork.seq,
            "acme": {r.id: r.seq for r in (await acme.tasks.list(limit=100)).items},
            "roles": [m.role for m in messages], "ids": [m.id for m in messages],
        }  # fmt: skip
        await save_snapshot(store.database, path)
        return facts
    finally:
        await store.close()


@pytest.fixture(scope="module")
def seeded(tmp_path_factory) -> tuple[Path, dict[str, Any]]:
    path = tmp_path_factory.mktemp("cli_tasks") / "store.gz"
    return path, asyncio.run(_seed(path))


@pytest.fixture
def data(seeded) -> Path:
    return seeded[0]


@pytest.fixture
def facts(seeded) -> dict[str, Any]:
    return seeded[1]


@pytest.fixture(autouse=True)
def no_tenant_env(monkeypatch) -> None:
    monkeypatch.delenv("MINDSTORE_TENANT", raising=False)


def invoke(data: Path, *args: str, env: dict[str, str] | None = None):
    return runner.invoke(app, ["--data", str(data), "tasks", *args], env=env)


def ok(data: Path, *args: str) -> Any:
    result = invoke(data, *args)
    assert result.exit_code == 0, result.output
    return result


def as_json(data: Path, *args: str) -> Any:
    return json.loads(ok(data, *args, "--format", "json").stdout)


def as_csv(data: Path, *args: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(ok(data, *args, "--format", "csv").stdout)))


# ---------------------------------------------------------------------- list
def test_list_json_is_the_tenants_tasks_newest_first(data, facts):
    rows = as_json(data, "list", "--tenant", "acme")
    assert {r["id"]: r["messages"] for r in rows} == facts["acme"]
    assert len(rows) == 4 and facts["other"] not in {r["id"] for r in rows}
    stamps = [datetime.fromisoformat(r["updated_at"]) for r in rows]
    assert stamps == sorted(stamps, reverse=True)
    research = next(r for r in rows if r["id"] == facts["research"])
    assert list(research) == ["id", "owner", "title", "state", "messages", "level", "tokens_in",
                              "tokens_out", "cost", "updated_at"]  # fmt: skip
    assert (research["owner"], research["title"], research["state"], research["level"]) == (
        "alice",
        "research",
        "running",
        0,
    )
    assert (research["tokens_in"], research["tokens_out"], research["cost"]) == (20, 8, 0.875)


def test_list_csv_and_table(data, facts):
    rows = as_csv(data, "list", "--tenant", "acme")
    assert {r["id"]: int(r["messages"]) for r in rows} == facts["acme"]
    assert [r["id"] for r in rows] == [r["id"] for r in as_json(data, "list", "--tenant", "acme")]
    chat = next(r for r in rows if r["id"] == facts["chat"])
    assert (chat["owner"], chat["state"], chat["tokens_in"]) == ("bob", "completed", "0")
    table = ok(data, "list", "--tenant", "acme").stdout
    assert "tokens_out" in table and "updated_at" in table
    assert all(task_id in table for task_id in facts["acme"])


def test_list_filters(data, facts):
    alice = {r["id"] for r in as_json(data, "list", "--tenant", "acme", "--owner", "alice")}
    assert alice == {facts["research"], facts["note"], facts["fork"]}
    done = as_json(data, "list", "--tenant", "acme", "--state", "completed")
    assert [r["id"] for r in done] == [facts["chat"]]
    assert as_json(data, "list", "--tenant", "acme", "--owner", "nobody") == []
    assert [r["id"] for r in as_json(data, "list", "--tenant", "beta")] == [facts["other"]]
    assert invoke(data, "list", "--tenant", "acme", "--state", "sleeping").exit_code == 2


def test_list_pages_with_the_cursor_on_stderr(data, facts):
    everything = [r["id"] for r in as_json(data, "list", "--tenant", "acme")]
    seen: list[str] = []
    cursor: list[str] = []
    for _ in range(10):
        result = ok(data, "list", "--tenant", "acme", "--limit", "1", "--format", "json", *cursor)
        page = json.loads(result.stdout)  # stdout holds the page only
        seen.extend(r["id"] for r in page)
        if "next page: --cursor " not in result.stderr:
            break
        assert len(page) == 1
        cursor = ["--cursor", result.stderr.split("--cursor ", 1)[1].strip()]
    assert seen == everything
    result = invoke(data, "list", "--tenant", "acme", "--cursor", "not-a-cursor")
    assert result.exit_code == 2 and "cursor" in result.stderr


# ---------------------------------------------------------------------- show
def test_show_json_has_the_record_and_its_sub_tasks(data, facts):
    shown = as_json(data, "show", facts["research"], "--tenant", "acme")
    assert shown["id"] == facts["research"] and shown["tenant"] == "acme"
    assert shown["seq"] == len(facts["ids"]) and "usage" not in shown
    assert (shown["tokens_in"], shown["tokens_out"], shown["cost"]) == (20, 8, 0.875)
    [span] = shown["sub_tasks"]
    entry = facts["ids"].index("entry1")
    assert (span["entry_id"], span["depth"], span["entry_index"]) == ("entry1", 1, entry)
    assert facts["roles"][span["exit_index"]] == "taskexit"
    assert as_json(data, "show", facts["note"], "--tenant", "acme")["sub_tasks"] == []


def test_show_table_and_csv(data, facts):
    table = ok(data, "show", facts["research"], "--tenant", "acme").stdout
    assert facts["research"] in table and "sub-tasks" in table and "entry1" in table
    assert "tokens_in" in table and "0.875" in table
    [row] = as_csv(data, "show", facts["research"], "--tenant", "acme")
    assert row["id"] == facts["research"] and row["tokens_out"] == "8"
    assert [s["entry_id"] for s in json.loads(row["sub_tasks"])] == ["entry1"]


# ---------------------------------------------------------------------- messages
def test_messages_json_are_the_full_stored_messages(data, facts):
    messages = as_json(data, "messages", facts["research"], "--tenant", "acme")
    assert [m["role"] for m in messages] == facts["roles"]
    assert [m["id"] for m in messages] == facts["ids"]
    assert messages[facts["roles"].index("taskconfig")]["content"][0]["model_name"] == "m"


def test_messages_rows_preview_and_usage(data, facts):
    rows = as_csv(data, "messages", facts["research"], "--tenant", "acme")
    assert [r["role"] for r in rows] == facts["roles"]
    assert [int(r["index"]) for r in rows] == list(range(len(facts["roles"])))
    assert rows[1]["text"] == "hello"
    first_assistant = rows[facts["roles"].index("assistant")]
    assert (first_assistant["text"], first_assistant["tokens_in"], first_assistant["tokens_out"],
            first_assistant["model_id"]) == ("hi", "10", "5", "m")  # fmt: skip
    assert rows[1]["tokens_in"] == "" and rows[1]["model_id"] == ""
    long = next(r for r in rows if r["text"].startswith("lorem"))
    assert len(long["text"]) == 80 and long["text"].endswith("…") and "  " not in long["text"]
    assert (long["scope"], long["depth"]) == ("entry1", "1")
    table = ok(data, "messages", facts["research"], "--tenant", "acme").stdout
    assert "taskentry" in table and "thanks" in table


def test_messages_windows(data, facts):
    ids = facts["ids"]
    tail = as_csv(data, "messages", facts["research"], "--tenant", "acme", "--tail", "3")
    assert [r["id"] for r in tail] == ids[-3:]
    assert [int(r["index"]) for r in tail] == list(range(len(ids) - 3, len(ids)))
    tail_json = as_json(data, "messages", facts["research"], "--tenant", "acme", "--tail", "2")
    assert [m["id"] for m in tail_json] == ids[-2:]
    window = as_csv(
        data, "messages", facts["research"], "--tenant", "acme", "--start", "2", "--limit", "3"
    )
    assert [r["id"] for r in window] == ids[2:5] and [r["index"] for r in window] == ["2", "3", "4"]
    rest = as_json(data, "messages", facts["research"], "--tenant", "acme", "--start", "10")
    assert [m["id"] for m in rest] == ids[10:]
    assert as_json(
        data, "messages", facts["research"], "--tenant", "acme", "--tail", "100"
    ) == as_json(data, "messages", facts["research"], "--tenant", "acme")


def test_messages_tail_conflicts_with_start(data, facts):
    result = invoke(
        data, "messages", facts["research"], "--tenant", "acme", "--tail", "2", "--start", "1"
    )
    assert result.exit_code == 2
    assert result.stderr.startswith("error:") and "--tail" in result.stderr and result.stdout == ""
    result = invoke(
        data, "messages", facts["research"], "--tenant", "acme", "--tail", "2", "--limit", "1"
    )
    assert result.exit_code == 2 and "--tail" in result.stderr
    assert (
        invoke(data, "messages", facts["research"], "--tenant", "acme", "--tail", "0").exit_code
        == 2
    )


# ---------------------------------------------------------------------- tree
def test_tree_json_has_the_fork_as_a_child(data, facts):
    tree = as_json(data, "tree", facts["research"], "--tenant", "acme")
    assert (tree["dialog_id"], tree["depth"], tree["messages"]) == (
        facts["research"],
        0,
        len(facts["ids"]),
    )
    [child] = tree["children"]
    assert (child["dialog_id"], child["depth"], child["messages"], child["last_n"]) == (
        facts["fork"],
        1,
        facts["fork_seq"],
        2,
    )
    assert child["children"] == []
    only_fork = as_json(data, "tree", facts["fork"], "--tenant", "acme")
    assert only_fork["dialog_id"] == facts["fork"] and only_fork["children"] == []
    whole = as_json(data, "tree", facts["fork"], "--tenant", "acme", "--from-root")
    assert whole == tree


def test_tree_table_and_csv(data, facts):
    text = ok(data, "tree", facts["research"], "--tenant", "acme").stdout
    lines = text.splitlines()
    assert len(lines) == 2 and facts["research"][:8] in lines[0] and facts["fork"][:8] in lines[1]
    rows = as_csv(data, "tree", facts["research"], "--tenant", "acme")
    assert rows == [
        {"id": facts["research"], "parent_id": "", "depth": "0",
         "messages": str(len(facts["ids"]))},
        {"id": facts["fork"], "parent_id": facts["research"], "depth": "1",
         "messages": str(facts["fork_seq"])},
    ]  # fmt: skip
    lone = as_csv(data, "tree", facts["note"], "--tenant", "acme")
    assert [r["id"] for r in lone] == [facts["note"]]


# ---------------------------------------------------------------------- tenants and errors
@pytest.mark.parametrize("command", [["list"], ["show", "x"], ["messages", "x"], ["tree", "x"]])
def test_missing_tenant_exits_7(data, command):
    result = invoke(data, *command)
    assert result.exit_code == 7
    assert result.stderr.startswith("error:") and "--tenant" in result.stderr


def test_tenant_from_the_environment(data, facts):
    result = invoke(data, "list", "--format", "json", env={"MINDSTORE_TENANT": "beta"})
    assert result.exit_code == 0, result.output
    assert [r["id"] for r in json.loads(result.stdout)] == [facts["other"]]


@pytest.mark.parametrize("command", ["show", "messages", "tree"])
def test_unknown_and_foreign_tasks_are_not_found(data, facts, command):
    result = invoke(data, command, "no-such-task", "--tenant", "acme")
    assert (
        result.exit_code == 3
        and result.stderr.startswith("error:")
        and "no-such-task" in result.stderr
    )
    result = invoke(data, command, facts["other"], "--tenant", "acme")  # beta's task
    assert result.exit_code == 3 and result.stdout == ""
    result = invoke(data, command, facts["research"], "--tenant", "beta")
    assert result.exit_code == 3 and result.stdout == ""


def test_reading_does_not_rewrite_the_data_file(data, facts):
    before = data.read_bytes()
    ok(data, "list", "--tenant", "acme")
    ok(data, "show", facts["research"], "--tenant", "acme")
    ok(data, "messages", facts["research"], "--tenant", "acme", "--tail", "1")
    ok(data, "tree", facts["research"], "--tenant", "acme")
    assert data.read_bytes() == before
