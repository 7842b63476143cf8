"""`mindstore tasks redact | follow` and `mindstore erase --before | --apply-policy`."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from pathlib import Path

from typer.testing import CliRunner

import mindstore
from mindstore.backends.snapshot import load_snapshot, save_snapshot
from mindstore.backup.retention import set_policy
from mindstore.cli import app

runner = CliRunner()
SECRET = "the secret plan"


def make_data(path: Path) -> str:
    async def build() -> str:
        store = await mindstore.connect("embedded")
        acme = store.scoped("acme")
        task = await acme.tasks.create(owner="alice", task_id="t1")
        await acme.tasks.add_human_message(task.id, SECRET, message_id="u1")
        await acme.tasks.add_human_message(task.id, "and more", message_id="u2")
        old = await acme.tasks.create(owner="alice", task_id="old")
        await store.database["tasks"].update_one(
            {"_id": "acme/old"}, {"$set": {"updated_at": dt.datetime(2020, 1, 1, tzinfo=dt.UTC)}}
        )
        await set_policy(store, "acme", max_age_days=30)
        await save_snapshot(store.database, path)
        await store.close()
        return old.id

    return asyncio.run(build())


def stored_bytes(path: Path) -> bytes:
    async def read() -> bytes:
        store = await mindstore.connect("embedded")
        await load_snapshot(store.database, path)
        docs = await store.database["tasks"].find({}).to_list()
        await store.close()
        return repr(sorted(docs, key=lambda d: d["_id"])).encode()

    return asyncio.run(read())


def test_follow_prints_every_message_and_redact_removes_the_content(tmp_path: Path) -> None:
    data = tmp_path / "d.gz"
    make_data(data)
    shown = runner.invoke(
        app, ["--data", str(data), "tasks", "follow", "t1", "--tenant", "acme", "--idle", "0.3"]
    )
    assert shown.exit_code == 0, shown.output
    assert [line.split()[3] for line in shown.output.splitlines()] == ["u1", "u2"]
    assert SECRET in shown.output
    done = runner.invoke(app, ["--data", str(data), "tasks", "redact", "t1", "u1",
                               "--tenant", "acme", "--reason", "asked"])  # fmt: skip
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["reason"] == "asked"
    assert SECRET.encode() not in stored_bytes(data)
    again = runner.invoke(app, ["--data", str(data), "tasks", "follow", "t1", "--tenant", "acme",
                                "--idle", "0.3", "--format", "json"])  # fmt: skip
    events = [json.loads(line) for line in again.output.splitlines()]
    assert [e["message"]["id"] for e in events] == ["u1", "u2"]
    bad = runner.invoke(
        app, ["--data", str(data), "tasks", "redact", "t1", "nope", "--tenant", "acme"]
    )
    assert bad.exit_code == 3 and "Traceback" not in bad.output


def test_erase_before_and_apply_policy(tmp_path: Path) -> None:
    data = tmp_path / "d.gz"
    old = make_data(data)
    before = stored_bytes(data)
    dry = runner.invoke(app, ["--data", str(data), "erase", "--tenant", "acme",
                              "--before", "2024-01-01", "--dry-run"])  # fmt: skip
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.stdout)["counts"]["tasks"] == 1 and stored_bytes(data) == before
    both = runner.invoke(app, ["--data", str(data), "erase", "--tenant", "acme",
                               "--before", "2024-01-01", "--apply-policy", "--yes"])  # fmt: skip
    assert both.exit_code == 2 and stored_bytes(data) == before
    applied = runner.invoke(
        app, ["--data", str(data), "erase", "--tenant", "acme", "--apply-policy", "--yes"]
    )
    assert applied.exit_code == 0, applied.output
    receipt = json.loads(applied.output)
    assert receipt["counts"]["tasks"] == 1 and receipt["scope"]["before"]
    assert f"acme/{old}".encode() not in stored_bytes(data)
    bad = runner.invoke(
        app, ["--data", str(data), "erase", "--tenant", "acme", "--before", "yesterday", "--yes"]
    )
    assert bad.exit_code == 2 and "Traceback" not in bad.output
