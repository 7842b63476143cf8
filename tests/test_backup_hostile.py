"""Forged backups: consistent hashes and counts, hostile content. Verify refuses each one
with a typed error, and restore refuses it before writing anything: the target database
(which holds data a forged filter could match) stays byte-identical, in every mode.

Every forgery re-signs the manifest with the right sizes, hashes, counts and message
total, as an attacker would: only the content checks can catch it.
"""

from __future__ import annotations

import asyncio
import gzip
import io
import json
import shutil
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from bson import Regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mindstore.backup import (
    BackupCorrupt,
    BackupError,
    BackupVersionError,
    backup,
    restore,
    verify,
)
from mindstore.ids import task_id_of, task_key
from test_backup_support import new_store, raw_dump, read_file_records, resign, rewrite_file, seed

Records = list[dict[str, Any]]
Edit = Callable[[dict[str, Records]], None]


@pytest.fixture
async def source(store):
    """acme (alice, bob, a fork) and beta: the data a forged filter would reach."""
    await seed(store)
    return store


@pytest.fixture
async def good(source, tmp_path) -> Path:
    path = tmp_path / "good"
    await backup(source, path, tenant="acme")
    await verify(path)
    return path


def forge(good: Path, name: str, edit: Edit) -> Path:
    """A copy of `good` with its records edited and everything re-signed consistently."""
    path = good.parent / f"forged-{name}-{len(list(good.parent.iterdir()))}"
    shutil.copytree(good, path)
    records = {
        n: read_file_records(path / f"{n}.jsonl.gz") for n in ("tasks", "dialog_nodes", "payloads")
    }
    edit(records)
    messages = sum(
        len(t.get("messages") or []) if isinstance(t, dict) else 0 for t in records["tasks"]
    )
    for collection, items in records.items():
        rewrite_file(path, collection, items, messages=messages)
    return path


async def refused(path: Path, source, error: type[BackupError], match: str) -> BackupError:
    """verify raises `error`; restore raises it too and writes nothing, in every mode."""
    with pytest.raises(error, match=match) as caught:
        await verify(path)
    assert caught.value.exit_code == error.exit_code
    before = await raw_dump(source)
    for mode in ("skip", "overwrite", "fail"):
        with pytest.raises(error):
            await restore(source, path, mode=mode)
    with pytest.raises(error):
        await restore(source, path, as_tenant="gamma")
    assert await raw_dump(source) == before
    return caught.value


# ----------------------------------------------------------------------------- edits


def _first(collection: str, **changes: Any) -> Edit:
    def edit(records: dict[str, Records]) -> None:
        records[collection][0].update(changes)

    return edit


def _message(field: str, value: Any) -> Edit:
    def edit(records: dict[str, Records]) -> None:
        records["tasks"][0]["messages"][0][field] = value

    return edit


def _with_dollar_key(collection: str) -> Edit:
    def edit(records: dict[str, Records]) -> None:
        records[collection][0] = {**records[collection][0], "$where": "sleep(1000)"}

    return edit


def _drop_payloads(records: dict[str, Records]) -> None:
    records["payloads"] = []


def _payload_of_another_task(records: dict[str, Records]) -> None:
    # task A's payload claims to belong to task B: A's marker would then read B's data
    tasks = [task_id_of(t["_id"]) for t in records["tasks"]]
    payload = records["payloads"][0]
    payload["task_id"] = next(t for t in tasks if t != payload["task_id"])


def _same_task_twice(records: dict[str, Records]) -> None:
    task = records["tasks"][0]
    other = dict(task)
    other["_id"] = (
        task_id_of(task["_id"]) if "/" in task["_id"] else task_key(task["tenant"], task["_id"])
    )
    records["tasks"].append(other)


def _other_tenants_key(records: dict[str, Records]) -> None:
    task = records["tasks"][0]
    task["_id"] = task_key("beta", task_id_of(task["_id"]))


def _node_out_of_tree(records: dict[str, Records]) -> None:
    records["dialog_nodes"][0].update(depth=7)


FORGERIES: list[tuple[str, Edit, str]] = [
    ("task _id operator", _first("tasks", _id={"$gt": ""}), "task _id must be a string"),
    ("task _id regex", _first("tasks", _id=Regex(".*")), "task _id must be a string"),
    ("task _id not a key", _first("tasks", _id="a b"), "invalid task _id"),
    ("task _id $-prefixed", _first("tasks", _id="$where"), "invalid task _id"),
    ("task _id 129 chars", _first("tasks", _id="x" * 129), "invalid task _id"),
    ("task _id of another tenant", _other_tenants_key, "names tenant 'beta'"),
    ("task tenant operator", _first("tasks", tenant={"$ne": None}), "invalid tenant"),
    ("task owner operator", _first("tasks", owner={"$ne": ""}), "owner"),
    ("task title not text", _first("tasks", title={"$gt": ""}), "title"),
    ("task title lone surrogate", _first("tasks", title="\ud800"), "BSON"),
    ("task $ key", _with_dollar_key("tasks"), "top-level key"),
    ("task seq 9999", _first("tasks", seq=9999), "seq is 9999"),
    ("task size_bytes", _first("tasks", size_bytes=1), "size_bytes"),
    ("task usage", _first("tasks", usage={"tokens_in": 10**12, "tokens_out": 0, "cache_reads": 0,
                                          "cache_writes": 0, "cost": 0.0}), "usage"),
    ("task usage short keys", _first("tasks", usage={"in": 10**12}), "usage"),
    ("task open sub-task", _first("tasks", scope_stack=[{"entry_id": "x", "index": 0}]),
     "scope_stack"),
    ("task state", _first("tasks", state="pwned"), "state"),
    ("message id expression", _message("id", "$$m.scope"), "message 0 id"),
    ("message id operator", _message("id", {"$ne": ""}), "message 0 id"),
    ("message scope expression", _message("scope", "$$m.scope"), "scope/depth"),
    ("message depth", _message("depth", 4), "scope/depth"),
    ("referenced payload missing", _drop_payloads, "not in the backup"),
    ("payload of another task", _payload_of_another_task, "refers to it"),
    ("same task twice (legacy and per-tenant key)", _same_task_twice, "duplicate"),
    ("node _id operator", _first("dialog_nodes", _id={"$gt": ""}), "dialog node _id"),
    ("node parent operator", _first("dialog_nodes", parent_id={"$ne": None}), "parent_id"),
    ("node owner operator", _first("dialog_nodes", owner={"$gt": ""}), "owner"),
    ("node $ key", _with_dollar_key("dialog_nodes"), "top-level key"),
    ("node out of its tree", _node_out_of_tree, "one place in a tree"),
    ("payload _id operator", _first("payloads", _id={"$gt": ""}), "payload _id"),
    ("payload _id not hex", _first("payloads", _id="../../etc/passwd"), "payload _id"),
    ("payload task operator", _first("payloads", task_id={"$ne": ""}), "payload task_id"),
    ("payload $ key", _with_dollar_key("payloads"), "top-level key"),
]  # fmt: skip


@pytest.mark.parametrize("label,edit,match", FORGERIES, ids=[f[0] for f in FORGERIES])
async def test_a_forged_record_is_refused_before_anything_is_written(
    source, good, label, edit, match
):
    await refused(forge(good, label.split()[0], edit), source, BackupCorrupt, match)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(field=st.sampled_from([("tasks", "_id"), ("tasks", "tenant"), ("tasks", "owner"),
                              ("dialog_nodes", "_id"), ("dialog_nodes", "root_id"),
                              ("payloads", "_id"), ("payloads", "task_id"),
                              ("payloads", "message_id")]),
       value=st.one_of(
           st.dictionaries(st.sampled_from(["$gt", "$ne", "$in", "$regex", "$where", "$expr"]),
                           st.one_of(st.text(max_size=4),
                                     st.lists(st.text(max_size=3), max_size=2)),
                           min_size=1, max_size=2),
           st.lists(st.text(max_size=3), min_size=1, max_size=2),
           st.integers(), st.booleans(), st.binary(min_size=1, max_size=4),
           st.sampled_from(["$$ROOT", "$where", "", "\x00", "a\nb", "x" * 200, "\x1b[2J"]),
       ))  # fmt: skip
def test_any_hostile_id_value_is_refused(good, field, value):
    collection, key = field
    path = forge(good, "h", _first(collection, **{key: value}))
    try:
        asyncio.run(_refused_into_a_new_store(path))
    finally:
        shutil.rmtree(path)


async def _refused_into_a_new_store(path: Path) -> None:
    with pytest.raises(BackupCorrupt):
        await verify(path)
    target = await new_store()
    try:
        with pytest.raises(BackupCorrupt):
            await restore(target, path, mode="overwrite")
        assert await raw_dump(target) == {"tasks": [], "dialog_nodes": [], "payloads": []}
    finally:
        await target.close()


# ----------------------------------------------------------------------------- manifest


def _edit_manifest(good: Path, change: Callable[[dict], None]) -> Path:
    path = good.parent / f"manifest-{len(list(good.parent.iterdir()))}"
    shutil.copytree(good, path)
    manifest = json.loads((path / "manifest.json").read_text())
    change(manifest)
    resign(path, manifest)
    return path


@pytest.mark.parametrize("change,error,match", [
    (lambda m: m["encoding"].update(compression="zstd"), BackupVersionError, "compression='zstd'"),
    (lambda m: m["encoding"].update(json="bson"), BackupVersionError, "json='bson'"),
    (lambda m: m["encoding"].update(encryption="aes"), BackupVersionError, "encryption"),
    (lambda m: m["encoding"].pop("escape"), BackupCorrupt, "lacks escape"),
    (lambda m: m.update(encoding="gzip"), BackupCorrupt, "encoding must be an object"),
    (lambda m: m.update(tenants=["acme", "$gt"]), BackupCorrupt, "tenants"),
    (lambda m: m["scope"].update(task_ids=["a b"]), BackupCorrupt, "task_ids"),
    (lambda m: m["scope"].update(owner="$ne"), BackupCorrupt, "scope.owner"),
])  # fmt: skip
async def test_a_forged_manifest_is_refused(source, good, change, error, match):
    await refused(_edit_manifest(good, change), source, error, match)


# ----------------------------------------------------------------------------- files


async def test_a_rewritten_file_is_corrupt_not_truncated(source, good):
    # a complete gzip file, smaller than the manifest says: one record removed
    path = _edit_manifest(good, lambda m: None)
    file = path / "tasks.jsonl.gz"
    lines = gzip.decompress(file.read_bytes()).splitlines(keepends=True)
    file.write_bytes(gzip.compress(b"".join(lines[1:]), mtime=0))
    error = await refused(path, source, BackupCorrupt, "recompressed, not truncated")
    assert "sha256" in str(error)
    # the same records reordered and recompressed at another level: corrupt too
    file.write_bytes(gzip.compress(b"".join(reversed(lines)), compresslevel=9, mtime=0))
    await refused(path, source, BackupCorrupt, "sha256")
    # two gzip members holding the same lines
    half = len(lines) // 2
    file.write_bytes(
        gzip.compress(b"".join(lines[:half]), mtime=0)
        + gzip.compress(b"".join(lines[half:]), mtime=0)
    )
    await refused(path, source, BackupCorrupt, "sha256")
    # while a file really cut short is still reported as truncated
    original = (good / "tasks.jsonl.gz").read_bytes()
    file.write_bytes(original[: len(original) - 7])
    from mindstore.backup import BackupIncomplete

    await refused(path, source, BackupIncomplete, "truncated")


def _tar(members: list[tuple[str, bytes | None]], where: Path) -> Path:
    """A tar archive with these members in this order (None: a symlink)."""
    with tarfile.open(where, "w", format=tarfile.PAX_FORMAT) as archive:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
                archive.addfile(info)
            else:
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
    return where


def _files(path: Path) -> list[tuple[str, bytes]]:
    order = ["manifest.json", "tasks.jsonl.gz", "dialog_nodes.jsonl.gz", "payloads.jsonl.gz"]
    return [(name, (path / name).read_bytes()) for name in order]


async def test_a_tar_with_a_name_twice_is_refused(source, good, tmp_path):
    members = _files(good)
    assert (await verify(_tar(members, tmp_path / "fine.tar"))).container == "tar"
    # verify would read the first tasks file, `tar x` would keep the second
    forged = forge(good, "second", _first("tasks", title="the copy tar x extracts"))
    twice = [*members, ("tasks.jsonl.gz", (forged / "tasks.jsonl.gz").read_bytes())]
    await refused(_tar(twice, tmp_path / "twice.tar"), source, BackupCorrupt, "twice")
    dot = [*members, ("./manifest.json", members[0][1])]
    await refused(_tar(dot, tmp_path / "dot.tar"), source, BackupCorrupt, "twice")
    link = [members[0], ("tasks.jsonl.gz", None), *members[2:]]
    await refused(_tar(link, tmp_path / "link.tar"), source, BackupCorrupt, "link")


async def test_restore_filters_are_literal_ids_only(source, good, monkeypatch):
    """Even with the shape checks bypassed, restore puts no non-string id in a filter."""
    import importlib

    verify_module = importlib.import_module("mindstore.backup.verify")

    path = forge(good, "bypass", _first("payloads", _id={"$gt": ""}))
    monkeypatch.setattr(
        verify_module, "check_shape", lambda name, where, record: _lenient(name, record)
    )
    before = await raw_dump(source)
    with pytest.raises(BackupError, match="non-string id"):
        await restore(source, path, mode="overwrite")
    assert await raw_dump(source) == before


async def test_a_file_changed_after_the_check_is_never_read_again(source, good, monkeypatch):
    """Restore writes the records its first pass checked (spooled), not the files as they
    are later: a swap after the check changes nothing that is written."""
    import importlib

    restore_module = importlib.import_module("mindstore.backup.restore")
    original_scan = restore_module.scan
    original = good.parent / "original"
    shutil.copytree(good, original)
    forged = forge(good, "swap", _first("tasks", _id={"$gt": ""}))

    async def scan_then_swap(*args, **kwargs):
        state = await original_scan(*args, **kwargs)
        shutil.copy(forged / "tasks.jsonl.gz", good / "tasks.jsonl.gz")  # an attacker's swap
        return state

    target, reference = await new_store(), await new_store()
    await restore(reference, original)
    monkeypatch.setattr(restore_module, "scan", scan_then_swap)
    report = await restore(target, good)
    assert report.totals["inserted"] == sum(report.manifest.counts.values())
    assert await raw_dump(target) == await raw_dump(reference)  # what was checked, not the forgery
    await target.close()
    await reference.close()


async def test_a_spool_changed_between_the_two_passes_is_not_written(source, good, monkeypatch):
    """The spool of checked records carries a digest per batch: a batch changed on disk
    between the passes stops the restore before it is written."""
    import importlib

    restore_module = importlib.import_module("mindstore.backup.restore")
    spool_module = importlib.import_module("mindstore.backup.spool")
    original_scan = restore_module.scan
    spools: list[Any] = []

    class Watched(spool_module.CheckedSpool):
        def __init__(self) -> None:
            super().__init__()
            spools.append(self)

    async def scan_then_tamper(*args, **kwargs):
        state = await original_scan(*args, **kwargs)
        offset, length, _ = spools[0]._batches["tasks"][0]
        spools[0]._file.seek(offset + length // 2)
        spools[0]._file.write(b"\x00tampered\x00")
        return state

    monkeypatch.setattr(restore_module, "CheckedSpool", Watched)
    monkeypatch.setattr(restore_module, "scan", scan_then_tamper)
    target = await new_store()
    with pytest.raises(BackupCorrupt, match="changed since it was written"):
        await restore(target, good)
    # payloads and nodes (written before tasks) may be there; no task
    assert (await raw_dump(target))["tasks"] == []
    await target.close()


def _lenient(name: str, record: dict) -> Any:
    from mindstore.backup.shape import PayloadFacts, check_node, check_task

    if name == "payloads":  # the forged payload passes, as if the checks had a hole
        ident = record["_id"] if isinstance(record["_id"], str) else "0" * 32
        return PayloadFacts(ident, record["tenant"], task_key(record["tenant"], record["task_id"]))
    return {"tasks": check_task, "dialog_nodes": check_node}[name](record)
