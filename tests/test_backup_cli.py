"""`mindstore backup | verify | restore | erase` through typer's CliRunner on an embedded
data file (`--data`), so that separate invocations share state."""

from __future__ import annotations

import asyncio
import gzip
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mindstore.backends.snapshot import load_snapshot, save_snapshot
from mindstore.cli import app
from test_backup_support import keyed, new_store, raw_dump

runner = CliRunner()


def invoke(data: Path, *args: str, input: str | None = None):
    return runner.invoke(app, ["--data", str(data), *args], input=input)


@pytest.fixture
def data(tmp_path) -> Path:
    path = tmp_path / "store.gz"

    async def seed() -> None:
        store = await new_store()
        for tenant, owner in (("acme", "alice"), ("acme", "bob"), ("beta", "zed")):
            task = await store.scoped(tenant).tasks.create(
                owner=owner, title=f"{owner}'s task", metadata={"$schema": "s"}
            )
            await store.scoped(tenant).tasks.add_human_message(task.id, f"hello from {owner}")
        await save_snapshot(store.database, path)
        await store.close()

    asyncio.run(seed())
    return path


def dump(path: Path) -> dict:
    async def read() -> dict:
        store = await new_store()
        await load_snapshot(store.database, path)
        try:
            return await raw_dump(store)
        finally:
            await store.close()

    return asyncio.run(read())


def test_backup_verify_erase_restore(data, tmp_path):
    original = dump(data)
    result = invoke(data, "backup", str(tmp_path / "acme"), "--tenant", "acme", "--json")
    assert result.exit_code == 0, result.output
    manifest = json.loads(result.output)
    assert manifest["collections"]["tasks"]["count"] == 2 and manifest["tenants"] == ["acme"]

    result = invoke(data, "verify", str(tmp_path / "acme"))
    assert result.exit_code == 0 and result.output.startswith("ok:")

    # non-interactive erase without --yes: refused, nothing erased
    result = invoke(data, "erase", "--tenant", "acme", "--owner", "alice")
    assert result.exit_code == 15 and "--yes" in result.output
    assert dump(data) == original

    result = invoke(data, "erase", "--tenant", "acme", "--owner", "alice", "--dry-run")
    assert result.exit_code == 0 and json.loads(result.stdout)["dry_run"] is True
    assert dump(data) == original

    receipt_file = tmp_path / "receipts" / "alice.json"
    result = invoke(
        data,
        "erase",
        "--tenant",
        "acme",
        "--owner",
        "alice",
        "--yes",
        "--receipt",
        str(receipt_file),
    )
    assert result.exit_code == 0, result.output
    receipt = json.loads(result.output)
    assert receipt == json.loads(receipt_file.read_text())
    assert receipt["counts"] == {"tasks": 1, "dialog_nodes": 0, "payloads": 0}
    assert len(receipt["ids_sha256"]) == 64
    assert dump(data) != original

    result = invoke(data, "restore", str(tmp_path / "acme"), "--dry-run", "--json")
    assert result.exit_code == 0
    planned = json.loads(result.output)
    assert planned["counts"]["tasks"] == {
        "inserted": 1,
        "overwritten": 0,
        "skipped": 1,
        "unchanged": 0,
    }

    result = invoke(data, "restore", str(tmp_path / "acme"))
    assert result.exit_code == 0, result.output
    assert "inserted" in result.output and "total" in result.output
    assert keyed(dump(data)) == keyed(original)  # restore writes per-tenant task keys

    result = invoke(data, "restore", str(tmp_path / "acme"), "--mode", "fail", "--json")
    assert result.exit_code == 0
    assert json.loads(result.output)["totals"] == {
        "inserted": 0,
        "overwritten": 0,
        "skipped": 0,
        "unchanged": 2,
    }


def test_verify_exit_codes(data, tmp_path):
    backup_dir = tmp_path / "b"
    assert invoke(data, "backup", str(backup_dir)).exit_code == 0
    tar = tmp_path / "b.tar"
    assert invoke(data, "backup", str(tar), "--tar").exit_code == 0
    assert invoke(data, "verify", str(tar)).exit_code == 0

    tasks = backup_dir / "tasks.jsonl.gz"
    original = tasks.read_bytes()
    tasks.write_bytes(original[:-5])
    assert invoke(data, "verify", str(backup_dir)).exit_code == 11  # incomplete
    flipped = bytearray(original)
    flipped[len(flipped) // 2] ^= 0xFF
    tasks.write_bytes(bytes(flipped))
    result = invoke(data, "verify", str(backup_dir))
    assert result.exit_code == 10 and "sha256" in result.output  # corrupt
    before = dump(data)
    assert invoke(data, "restore", str(backup_dir)).exit_code == 10
    assert dump(data) == before
    tasks.write_bytes(original)
    manifest = json.loads((backup_dir / "manifest.json").read_text())
    manifest["format_version"] = 99
    (backup_dir / "manifest.json").write_text(json.dumps(manifest))
    assert invoke(data, "verify", str(backup_dir)).exit_code == 13  # wrong version
    assert invoke(data, "verify", str(tmp_path / "missing")).exit_code == 12  # unreadable


def test_usage_errors(data, tmp_path):
    assert invoke(data, "backup", str(tmp_path / "x"), "--since", "not-a-time").exit_code == 2
    assert invoke(data, "backup", str(tmp_path / "x"), "--owner", "bob").exit_code == 2
    assert invoke(data, "backup", str(tmp_path / "y")).exit_code == 0
    assert invoke(data, "backup", str(tmp_path / "y")).exit_code == 8  # exists
    assert invoke(data, "erase", "--yes").exit_code == 7  # no tenant
    assert (
        invoke(data, "erase", "--tenant", "acme", "--owner", "a", "--task", "t", "--yes").exit_code
        == 2
    )
    assert invoke(data, "restore", str(tmp_path / "y"), "--mode", "merge").exit_code == 2
    # a copy into another tenant next to the source tenant: task ids are per tenant, so
    # it goes in beside it (and a second run finds everything unchanged)
    assert invoke(data, "backup", str(tmp_path / "acme"), "--tenant", "acme").exit_code == 0
    before = dump(data)
    result = invoke(data, "restore", str(tmp_path / "acme"), "--as-tenant", "gamma", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["totals"]["inserted"] == 2
    after = dump(data)
    assert len(after["tasks"]) == len(before["tasks"]) + 2
    assert all(doc in after[name] for name, docs in before.items() for doc in docs)
    result = invoke(
        data, "restore", str(tmp_path / "acme"), "--as-tenant", "gamma", "--mode", "fail", "--json"
    )
    assert result.exit_code == 0 and json.loads(result.output)["totals"]["unchanged"] == 2
    after = dump(data)
    assert invoke(data, "restore", str(tmp_path / "acme"), "--as-tenant", "$gamma").exit_code == 2
    assert dump(data) == after


def test_task_and_since_scopes_from_the_cli(data, tmp_path):
    result = invoke(data, "backup", str(tmp_path / "all"), "--json")
    ids = []
    with gzip.open(tmp_path / "all" / "tasks.jsonl.gz") as handle:
        for line in handle:
            ids.append(json.loads(line)["_id"])
    assert len(ids) == 3
    result = invoke(
        data, "backup", str(tmp_path / "two"), "--task", ids[0], "--task", ids[2], "--json"
    )
    assert result.exit_code == 0 and json.loads(result.output)["collections"]["tasks"]["count"] == 2
    tenant, _, bare = ids[0].partition("/")
    result = invoke(
        data, "backup", str(tmp_path / "bare"), "--task", bare
    )  # ambiguous: which tenant?
    assert (
        result.exit_code == 2 and "--tenant" in result.output and not (tmp_path / "bare").exists()
    )
    result = invoke(
        data, "backup", str(tmp_path / "bare"), "--tenant", tenant, "--task", bare, "--json"
    )
    assert result.exit_code == 0 and json.loads(result.output)["collections"]["tasks"]["count"] == 1
    result = invoke(
        data, "backup", str(tmp_path / "none"), "--since", "2999-01-01T00:00:00Z", "--json"
    )
    assert result.exit_code == 0 and json.loads(result.output)["collections"]["tasks"]["count"] == 0
    assert invoke(data, "verify", str(tmp_path / "none")).exit_code == 0


def test_erase_asks_on_a_terminal(data, monkeypatch):
    from mindstore.commands import backup as commands

    monkeypatch.setattr(commands, "_interactive", lambda: True)
    original = dump(data)
    result = invoke(data, "erase", "--tenant", "beta", input="n\n")
    assert result.exit_code == 15 and "erase 1 tasks" in result.output
    assert dump(data) == original
    result = invoke(data, "erase", "--tenant", "beta", input="y\n")
    assert result.exit_code == 0, result.output
    assert '"tasks": 1' in result.output
    assert len(dump(data)["tasks"]) == len(original["tasks"]) - 1
