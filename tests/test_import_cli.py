"""`mindstore import --from KIND SOURCE --tenant T ...` through typer's CliRunner on an
embedded `--data` store: the receipt on stdout and in `--receipt FILE`, a second run
writing nothing, a bad source refused with its exit code and the data file untouched."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from agents.memory.sqlite_session import SQLiteSession
from typer.testing import CliRunner

import mindstore
from mindstore.backends.snapshot import load_snapshot
from mindstore.cli import app
from mindstore.integrations.openai_agents import MindstoreSession

runner = CliRunner()
ITEMS = [{"role": "user", "content": "Where is my parcel?"},
         {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
          "content": [{"type": "output_text", "text": "It left Porto today.",
                       "annotations": []}]}]  # fmt: skip


def build(path: Path) -> None:
    async def body() -> None:
        for session_id in ("parcel-1", "parcel-2"):
            session = SQLiteSession(session_id, str(path))
            await session.add_items(ITEMS)
            session.close()

    asyncio.run(body())


def served(data: Path) -> dict[str, object]:
    async def body() -> dict[str, object]:
        store = await mindstore.connect("embedded")
        try:
            await load_snapshot(store.database, data)
            view = store.scoped("acme", "ana")
            return {sid: await MindstoreSession(sid, view).get_items()
                    for sid in ("parcel-1", "parcel-2")}  # fmt: skip
        finally:
            await store.close()

    return asyncio.run(body())


def test_import_prints_and_writes_the_receipt_and_is_idempotent(tmp_path: Path) -> None:
    source, data, receipt = tmp_path / "agents.db", tmp_path / "store.json.gz", tmp_path / "r.json"
    build(source)
    args = ["--data", str(data), "import", "--from", "openai-agents", str(source),
            "--tenant", "acme", "--owner", "ana", "--receipt", str(receipt)]  # fmt: skip
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    printed = json.loads(first.stdout)
    assert printed == json.loads(receipt.read_text())
    assert printed["read"] == {"conversations": 2, "messages": 4}
    assert printed["written"] == {"conversations": 2, "messages": 4}
    assert served(data) == {"parcel-1": ITEMS, "parcel-2": ITEMS}
    again = runner.invoke(app, args)
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["written"] == {"conversations": 0, "messages": 0}
    assert json.loads(again.stdout)["written_sha256"] == printed["written_sha256"]


def test_a_bad_source_exits_2_naming_it_and_leaves_the_data_file(tmp_path: Path) -> None:
    source, data = tmp_path / "agents.db", tmp_path / "store.json.gz"
    build(source)
    assert runner.invoke(app, ["--data", str(data), "import", "--from", "openai-agents",
                               str(source), "--tenant", "acme"]).exit_code == 0  # fmt: skip
    before = data.read_bytes()
    for args, code, says in [
        (["--from", "openai-agents", str(tmp_path / "nope.db")], 2, "nope.db"),
        (["--from", "lotus-notes", str(source)], 2, "lotus-notes"),
        (["--from", "openai-agents", str(source), "--owner-from", "user_id"], 2, "user_id"),
    ]:
        done = runner.invoke(app, ["--data", str(data), "import", *args, "--tenant", "t2"])
        assert done.exit_code == code, done.output
        assert says in done.stderr
        assert data.read_bytes() == before


def test_a_dry_run_leaves_the_data_file(tmp_path: Path) -> None:
    source, data = tmp_path / "agents.db", tmp_path / "store.json.gz"
    build(source)
    base = ["--data", str(data), "import", "--from", "openai-agents", str(source)]
    assert runner.invoke(app, [*base, "--tenant", "acme"]).exit_code == 0
    before = data.read_bytes()
    done = runner.invoke(app, [*base, "--tenant", "t2", "--dry-run"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["written"]["messages"] == 4
    assert data.read_bytes() == before


def test_progress_goes_to_stderr_on_long_runs(tmp_path: Path, monkeypatch: Any) -> None:
    """Past `PROGRESS_EVERY` conversations a line every that many, and at the end; stdout
    stays the receipt alone."""
    from mindstore.commands import imports

    source, data = tmp_path / "agents.db", tmp_path / "store.json.gz"
    build(source)
    base = ["--data", str(data), "import", "--from", "openai-agents", str(source)]
    quiet = runner.invoke(app, [*base, "--tenant", "acme"])
    assert "conversations" not in quiet.stderr.replace('"conversations"', "")
    monkeypatch.setattr(imports, "PROGRESS_EVERY", 1)
    done = runner.invoke(app, [*base, "--tenant", "t2"])
    assert done.exit_code == 0, done.output
    assert [line for line in done.stderr.splitlines() if "openai-agents" in line] == [
        "openai-agents: 1/2 conversations",
        "openai-agents: 2/2 conversations",
    ]
    assert json.loads(done.stdout)["read"]["conversations"] == 2
