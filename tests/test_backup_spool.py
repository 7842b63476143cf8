"""Restore parses each backup record once: the write pass takes the checked records from
the spool (`mindstore.backup.spool`), which keeps every BSON type and key order."""

from __future__ import annotations

import datetime as dt
import importlib
from pathlib import Path
from typing import Any

import bson
import pytest
from bson import Binary, Code, Decimal128, Int64, Regex
from hypothesis import HealthCheck, assume, given, settings

from mindstore.backup import BackupCorrupt, backup, restore
from mindstore.backup.spool import CheckedSpool
from test_backup_support import (
    keyed,
    new_store,
    raw_dump,
    read_file_records,
    rewrite_file,
    seed,
    values,
)

verify_module = importlib.import_module("mindstore.backup.verify")


@pytest.fixture
async def source(store):
    await seed(store)
    return store


def count_decodes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the Extended JSON parses of backup records (`decode_line` as verify calls it)."""
    calls = [0]
    original = verify_module.decode_line

    def counting(line: bytes | str) -> dict[str, Any]:
        calls[0] += 1
        return original(line)

    monkeypatch.setattr(verify_module, "decode_line", counting)
    return calls


@pytest.mark.parametrize("dry_run", [False, True])
async def test_restore_parses_each_record_once(source, tmp_path, monkeypatch, dry_run):
    manifest = await backup(source, tmp_path / "b")
    records = sum(manifest.counts.values())
    calls = count_decodes(monkeypatch)
    target = await new_store()
    report = await restore(target, tmp_path / "b", dry_run=dry_run)
    assert calls[0] == records  # formerly 2 x records: the write pass parsed the files again
    if not dry_run:
        assert report.totals["inserted"] == records
        assert keyed(await raw_dump(target)) == keyed(await raw_dump(source))  # byte-identical
    await target.close()


async def test_a_second_restore_compares_the_spooled_records_byte_for_byte(
    source, tmp_path, monkeypatch
):
    await backup(source, tmp_path / "b")
    target = await new_store()
    await restore(target, tmp_path / "b")
    calls = count_decodes(monkeypatch)
    again = await restore(target, tmp_path / "b", mode="overwrite")
    assert again.totals["unchanged"] == sum(again.manifest.counts.values())
    assert calls[0] == sum(again.manifest.counts.values())
    await target.close()


async def test_a_record_bson_cannot_hold_is_refused_before_anything_is_written(source, tmp_path):
    await backup(source, tmp_path / "b")
    payloads = read_file_records(tmp_path / "b" / "payloads.jsonl.gz")
    payloads[0]["note"] = {"a\x00b": 1}  # JSON holds a NUL in a key; BSON cannot
    rewrite_file(tmp_path / "b", "payloads", payloads)
    target = await new_store()
    with pytest.raises(BackupCorrupt, match="BSON"):
        await restore(target, tmp_path / "b")
    assert await raw_dump(target) == {"tasks": [], "dialog_nodes": [], "payloads": []}
    await target.close()
    spool = CheckedSpool()  # and the spool itself never keeps what BSON cannot hold
    try:
        with pytest.raises(BackupCorrupt, match="cannot be stored in MongoDB"):
            spool.add("payloads", [{"_id": "p", "note": {"a\x00b": 1}}])
    finally:
        spool.close()


RECORD = {
    "_id": "r1",
    "z": 1,
    "a": [Int64(5), 2**40, 1.5, None, True],
    "when": dt.datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=dt.UTC),
    "bin": [b"raw", Binary(b"\x00" * 16, 4), Binary(b"x", 0x80)],
    "other": [Decimal128("1.10"), Regex("^a", "i"), Code("f()", {"x": 1})],
    "nested": {"b": {"$ref": "x", "$schema": "s"}, "a": {}},
}


def test_the_spool_gives_back_each_batch_as_it_was_added():
    spool = CheckedSpool()
    try:
        spool.add("tasks", [RECORD, {"_id": "r2"}])
        spool.add("payloads", [{"_id": "p"}])
        spool.add("tasks", [{"_id": "r3", "k": "v"}])
        batches = list(spool.batches("tasks"))
        assert [[r["_id"] for r in batch] for batch in batches] == [["r1", "r2"], ["r3"]]
        assert bson.encode(batches[0][0]) == bson.encode(RECORD)  # types and key order kept
        assert batches[0][0]["when"] == RECORD["when"] and batches[0][0]["when"].tzinfo is not None
        assert list(spool.batches("dialog_nodes")) == []
        assert spool.count("tasks") == 2 and spool.count("dialog_nodes") == 0
    finally:
        spool.close()


def _read_as_a_dbref_reordered(value: object) -> bool:
    """Whether `value` holds a document that pymongo decodes as a DBRef (a string `$ref`
    and an `$id`) whose keys do not start with them: it comes back re-ordered (see the
    strict xfail below), so the byte-for-byte property leaves it to that test."""
    if isinstance(value, dict):
        keys = list(value)
        if isinstance(value.get("$ref"), str) and "$id" in value and keys[:2] != ["$ref", "$id"]:
            return True
        return any(_read_as_a_dbref_reordered(v) for v in value.values())
    if isinstance(value, list):
        return any(_read_as_a_dbref_reordered(v) for v in value)
    return False


@pytest.mark.xfail(strict=True, reason="known: pymongo decodes any document with a string "
                   "$ref and an $id as a DBRef, which encodes $ref and $id first")  # fmt: skip
def test_a_dbref_shaped_document_keeps_its_key_order():
    """Found by the property below in a CI run (its shrink then crashed inside hypothesis on
    a `bson.Code` value): the spool gives such a document back with the same fields and
    values in another order. Not fixed yet: the spool would have to keep raw BSON."""
    record = {"_id": "r", "v": {"a": 1, "$id": 2, "$ref": "x"}}
    spool = CheckedSpool()
    try:
        spool.add("tasks", [record])
        (batch,) = list(spool.batches("tasks"))
        assert bson.encode(batch[0]) == bson.encode(record)
    finally:
        spool.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values(16))
def test_any_bson_value_comes_back_byte_identical(value):
    assume(not _read_as_a_dbref_reordered(value))
    record = {"_id": "r", "v": value}
    try:
        expected = bson.encode(record)
    except Exception:
        return  # not a storable record (the spool refuses those: see above)
    spool = CheckedSpool()
    try:
        spool.add("tasks", [record])
        (batch,) = list(spool.batches("tasks"))
        assert bson.encode(batch[0]) == expected
    finally:
        spool.close()


def test_a_changed_batch_is_refused(tmp_path: Path):
    spool = CheckedSpool()
    try:
        spool.add("tasks", [RECORD])
        spool._file.seek(3)
        spool._file.write(b"\xff")
        with pytest.raises(BackupCorrupt, match="changed since it was written"):
            list(spool.batches("tasks"))
    finally:
        spool.close()
