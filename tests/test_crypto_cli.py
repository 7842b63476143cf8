"""`mindstore keys status | rotate | reencrypt | shred` through typer's CliRunner on an
embedded data file (`--data`), so that separate invocations share state."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import mindstore
from mindstore.backends.snapshot import load_snapshot, save_snapshot
from mindstore.cli import app
from mindstore.crypto import Keyring, LocalMasterKey
from mindstore.crypto.aead import key_version
from mindstore.errors import KeyShredded

runner = CliRunner()


def invoke(data: Path, *args: str, input: str | None = None) -> Any:
    return runner.invoke(app, ["--data", str(data), *args], input=input)


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "master.key"
    path.write_text(os.urandom(32).hex())
    return path


@pytest.fixture
def data(tmp_path: Path, key_file: Path) -> Path:
    path = tmp_path / "store.gz"

    async def seed() -> None:
        keyring = Keyring(LocalMasterKey.from_file(key_file))
        store = await mindstore.connect("embedded", keyring=keyring)
        for tenant in ("acme", "beta"):
            task = await store.scoped(tenant).tasks.create(title=f"{tenant} title", task_id="t1")
            await store.scoped(tenant).tasks.add_human_message(task.id, f"hello from {tenant}")
        await save_snapshot(store.database, path)
        await store.close()

    asyncio.run(seed())
    return path


def read(path: Path, key_file: Path, tenant: str) -> list[str]:
    async def body() -> list[str]:
        store = await mindstore.connect(
            "embedded", keyring=Keyring(LocalMasterKey.from_file(key_file))
        )
        await load_snapshot(store.database, path)
        try:
            return [m.text() for m in await store.scoped(tenant).tasks.messages("t1")]
        finally:
            await store.close()

    return asyncio.run(body())


def raw_task(path: Path, tenant: str) -> dict[str, Any]:
    async def body() -> dict[str, Any]:
        store = await mindstore.connect("embedded")
        await load_snapshot(store.database, path)
        try:
            document = await store.database["tasks"].find_one({"_id": f"{tenant}/t1"})
            assert document is not None
            return document
        finally:
            await store.close()

    return asyncio.run(body())


def test_status_rotate_reencrypt(data: Path, key_file: Path) -> None:
    result = invoke(data, "keys", "status", "--tenant", "acme")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["versions"] == [1]
    result = invoke(data, "keys", "rotate", "--tenant", "acme")  # no master key
    assert result.exit_code == 7 and "--master-key" in result.output
    result = invoke(data, "keys", "rotate", "--tenant", "acme", "--master-key", str(key_file),
                    "--reencrypt")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert '"version": 2' in result.output and "re-encrypting: 1/1 tasks" in result.output
    raw = raw_task(data, "acme")
    assert key_version(raw["messages"][0]["content"][0]["text"]) == 2
    assert read(data, key_file, "acme") == ["hello from acme"]
    assert key_version(raw_task(data, "beta")["messages"][0]["content"][0]["text"]) == 1
    result = invoke(data, "keys", "reencrypt", "--tenant", "acme", "--master-key", str(key_file))
    assert result.exit_code == 0 and json.loads(result.stdout)["tasks"] == 1, result.output


def test_shred_confirms_writes_a_receipt_and_destroys_the_keys(
    data: Path, key_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mindstore.commands import keys as commands

    result = invoke(data, "keys", "shred", "--tenant", "acme")  # no terminal, no --yes
    assert result.exit_code == 15
    assert read(data, key_file, "acme") == ["hello from acme"]
    monkeypatch.setattr(commands, "_interactive", lambda: True)
    result = invoke(data, "keys", "shred", "--tenant", "acme", input="n\n")
    assert result.exit_code == 15 and "shred the 1 data key(s) of tenant acme" in result.output
    assert read(data, key_file, "acme") == ["hello from acme"]
    receipt = tmp_path / "receipt.json"
    result = invoke(data, "keys", "shred", "--tenant", "acme", "--receipt", str(receipt),
                    input="y\n")  # fmt: skip
    assert result.exit_code == 0, result.output
    kept = json.loads(receipt.read_text())
    assert kept["tenant"] == "acme" and kept["keys_destroyed"] == 1
    assert kept["versions_destroyed"] == [1] and kept["shredded_at"]
    with pytest.raises(KeyShredded):
        read(data, key_file, "acme")
    assert read(data, key_file, "beta") == ["hello from beta"]
    status = json.loads(invoke(data, "keys", "status", "--tenant", "acme").output)
    assert status["shredded"] is True and status["versions"] == []
    result = invoke(data, "keys", "rotate", "--tenant", "acme", "--master-key", str(key_file))
    assert result.exit_code == 17  # KeyShredded


def test_a_wrong_master_key_is_refused(data: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.key"
    other.write_bytes(os.urandom(32))
    result = invoke(data, "keys", "reencrypt", "--tenant", "acme", "--master-key", str(other))
    assert result.exit_code == 16 and "master key" in result.output
