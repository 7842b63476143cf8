"""Damaged backups: verify names each fault with its exit code; restore refuses before writing."""

from __future__ import annotations

import gzip
import json
import shutil
import tarfile
from pathlib import Path

import pytest

from mindstore.backup import (
    BackupCorrupt,
    BackupIncomplete,
    BackupUnreadable,
    BackupVersionError,
    backup,
    restore,
    verify,
)
from test_backup_support import (
    COLLECTIONS,
    new_store,
    raw_dump,
    read_file_records,
    resign,
    rewrite_file,
)

CORRUPT, INCOMPLETE, UNREADABLE, VERSION = 10, 11, 12, 13


@pytest.fixture
async def good(store, tmp_path) -> Path:
    store.offload_threshold = 200
    for tenant in ("acme", "beta"):
        scoped = store.scoped(tenant)
        for owner in ("alice", "bob"):
            task = await scoped.dialogs.create(owner, title=f"{tenant} {owner}")
            for i in range(30):
                await scoped.tasks.add_human_message(task.id, f"message {i} of {owner} " * 5)
            await scoped.tasks.add_human_message(task.id, "attachment " + "\x00" * 300)
    path = tmp_path / "good"
    await backup(store, path, tenant="acme")
    await verify(path)
    return path


def _copy(good: Path, name: str) -> Path:
    target = good.parent / name
    shutil.copytree(good, target)
    return target


async def _assert_refused(path: Path, error: type, code: int, match: str | None = None) -> None:
    with pytest.raises(error, match=match) as caught:
        await verify(path)
    assert caught.value.exit_code == code
    # restore refuses the same backup before it writes anything
    target = await new_store()
    with pytest.raises(error):
        await restore(target, path)
    assert await raw_dump(target) == {name: [] for name in COLLECTIONS}
    await target.close()


async def test_truncated_file_is_incomplete(good):
    path = _copy(good, "truncated")
    data = (path / "tasks.jsonl.gz").read_bytes()
    (path / "tasks.jsonl.gz").write_bytes(data[: len(data) // 2])
    await _assert_refused(path, BackupIncomplete, INCOMPLETE, "truncated")


@pytest.mark.parametrize("name", ["tasks", "payloads"])
async def test_one_flipped_byte_is_corrupt(good, name):
    path = _copy(good, f"flipped-{name}")
    file = path / f"{name}.jsonl.gz"
    data = bytearray(file.read_bytes())
    data[len(data) // 2] ^= 0x01
    file.write_bytes(bytes(data))
    await _assert_refused(path, BackupCorrupt, CORRUPT, "sha256")


async def test_missing_file_is_incomplete(good):
    path = _copy(good, "missing")
    (path / "dialog_nodes.jsonl.gz").unlink()
    await _assert_refused(path, BackupIncomplete, INCOMPLETE, "missing")


async def test_missing_manifest_is_incomplete(good):
    path = _copy(good, "no-manifest")
    (path / "manifest.json").unlink()
    await _assert_refused(path, BackupIncomplete, INCOMPLETE, "manifest")


async def test_extra_file_is_corrupt(good):
    path = _copy(good, "extra")
    (path / "tasks-2.jsonl.gz").write_bytes(gzip.compress(b"{}\n"))
    await _assert_refused(path, BackupCorrupt, CORRUPT, "not listed")


@pytest.mark.parametrize(
    "edit",
    [
        lambda m: m["collections"]["tasks"].update(count=m["collections"]["tasks"]["count"] - 1),
        lambda m: m.update(tenants=["acme", "beta"]),
        lambda m: m["scope"].update(tenant=None),
        lambda m: m.update(created_at="2020-01-01T00:00:00.000Z"),
    ],
)
async def test_edited_manifest_is_corrupt(good, edit):
    path = _copy(good, "edited")
    manifest = json.loads((path / "manifest.json").read_text())
    edit(manifest)
    (path / "manifest.json").write_text(json.dumps(manifest, indent=2))
    await _assert_refused(path, BackupCorrupt, CORRUPT, "manifest")


async def test_re_signed_manifest_with_wrong_count_is_corrupt(good):
    path = _copy(good, "recount")
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["collections"]["payloads"]["count"] += 1
    resign(path, manifest)
    await _assert_refused(path, BackupCorrupt, CORRUPT, "records")


async def test_a_record_from_the_wrong_tenant_is_corrupt(good):
    # consistent hashes and counts: only the scope check can see it
    path = _copy(good, "wrong-tenant")
    records = read_file_records(path / "payloads.jsonl.gz")
    records.append({**records[0], "_id": "5" * 32, "tenant": "beta"})
    rewrite_file(path, "payloads", records)
    await _assert_refused(path, BackupCorrupt, CORRUPT, "tenant 'beta' is outside")


async def test_a_task_outside_the_owner_scope_is_corrupt(store, good, tmp_path):
    await backup(store, tmp_path / "alice", tenant="acme", owner="alice")
    records = read_file_records(good / "tasks.jsonl.gz")  # alice's and bob's tasks
    messages = sum(len(r["messages"]) for r in records)
    if (good / "task_pages.jsonl.gz").exists():  # paged tasks: their sealed pages go along
        assert (tmp_path / "alice" / "task_pages.jsonl.gz").exists()
        pages = read_file_records(good / "task_pages.jsonl.gz")
        rewrite_file(tmp_path / "alice", "task_pages", pages)
        messages += sum(len(p["messages"]) for p in pages)
    rewrite_file(tmp_path / "alice", "tasks", records, messages=messages)
    await _assert_refused(tmp_path / "alice", BackupCorrupt, CORRUPT, "owner 'bob'")


async def test_dangling_references_are_corrupt(good):
    path = _copy(good, "dangling")
    tasks = read_file_records(path / "tasks.jsonl.gz")
    rewrite_file(path, "tasks", tasks[:1], messages=len(tasks[0]["messages"]))
    await _assert_refused(
        path, BackupCorrupt, CORRUPT, "refers to a task that is not in the backup"
    )


async def test_unparsable_record_and_duplicate_id_are_corrupt(good):
    path = _copy(good, "unparsable")
    file = path / "dialog_nodes.jsonl.gz"
    data = gzip.compress(
        gzip.decompress(file.read_bytes()) + b'{"_id": {"$numberInt": "x"}}\n', mtime=0
    )
    file.write_bytes(data)
    manifest = json.loads((path / "manifest.json").read_text())
    import hashlib

    manifest["collections"]["dialog_nodes"].update(
        bytes=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        count=manifest["collections"]["dialog_nodes"]["count"] + 1,
    )
    resign(path, manifest)
    await _assert_refused(path, BackupCorrupt, CORRUPT, "line 3")

    duplicate = _copy(good, "duplicate")
    nodes = read_file_records(duplicate / "dialog_nodes.jsonl.gz")
    rewrite_file(duplicate, "dialog_nodes", nodes + nodes[:1])
    await _assert_refused(duplicate, BackupCorrupt, CORRUPT, "duplicate")


async def test_wrong_format_version(good):
    path = _copy(good, "future")
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["format_version"] = 99
    resign(path, manifest)
    await _assert_refused(path, BackupVersionError, VERSION, "version 99")


async def test_unreadable_backups(good, tmp_path):
    await _assert_refused(tmp_path / "nothing-here", BackupUnreadable, UNREADABLE, "no such")
    (tmp_path / "garbage.tar").write_bytes(b"this is not a tar archive" * 40)
    await _assert_refused(tmp_path / "garbage.tar", BackupUnreadable, UNREADABLE, "neither")
    other = _copy(good, "other-format")
    (other / "manifest.json").write_text(json.dumps({"format": "something-else"}))
    await _assert_refused(other, BackupUnreadable, UNREADABLE, "not a mindstore backup")


async def test_tar_faults(store, good, tmp_path):
    archive = tmp_path / "b.tar"
    await backup(store, archive, tenant="acme")
    assert (await verify(archive)).container == "tar"
    with tarfile.open(archive) as tar:
        assert tar.getnames()[0] == "manifest.json"
    # a tar cut inside its last member
    data = archive.read_bytes()
    with tarfile.open(archive) as tar:
        last = max(m.offset_data for m in tar.getmembers())
    cut = tmp_path / "cut.tar"
    cut.write_bytes(data[: last + 10])
    await _assert_refused(cut, BackupIncomplete, INCOMPLETE, "cut short")
    cut.write_bytes(data[: len(data) // 3])
    await _assert_refused(cut, BackupIncomplete, INCOMPLETE)
    # a tar with an extra member
    extra = tmp_path / "extra.tar"
    shutil.copy(archive, extra)
    with tarfile.open(extra, "a") as tar:
        tar.add(good / "manifest.json", arcname="notes/manifest.json")
    await _assert_refused(extra, BackupCorrupt, CORRUPT, "not listed")
