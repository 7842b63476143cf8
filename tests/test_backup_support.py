"""Helpers shared by the backup tests: stores, raw dumps, hypothesis strategies for BSON."""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import json
import struct
import uuid
from pathlib import Path
from typing import Any

import bson
from bson import (
    Binary,
    Code,
    Decimal128,
    Int64,
    MaxKey,
    MinKey,
    ObjectId,
    Regex,
    Timestamp,
)
from hypothesis import strategies as st

import mindstore
from mindstore.backup.codec import decode_line, to_ejson
from mindstore.backup.manifest import manifest_checksum
from mindstore.ids import task_id_of, task_key

COLLECTIONS = ("tasks", "dialog_nodes", "payloads")


async def new_store(**kwargs: Any) -> mindstore.Store:
    return await mindstore.connect("embedded", database=f"t_{uuid.uuid4().hex[:10]}", **kwargs)


async def raw_dump(store: mindstore.Store) -> dict[str, list[bytes]]:
    """Every stored document as BSON bytes (key order and types included), by `_id`."""
    out = {}
    for name in COLLECTIONS:
        docs = await store.database[name].find({}).to_list()
        out[name] = sorted(
            (bson.encode(d) for d in docs), key=lambda raw: repr(bson.decode(raw)["_id"])
        )
    return out


def keyed(dump: dict[str, list[bytes]]) -> dict[str, list[bytes]]:
    """A raw dump with every task and dialog-node `_id` in the per-tenant form
    (``"<tenant>/<task id>"``), whichever form the documents were in.

    The repositories are moving from bare task ids to per-tenant keys, and restore writes
    the form they read; comparing dumps in this form keeps "byte-identical after a
    restore" meaningful in both states."""
    out = {}
    for name, raws in dump.items():
        if name == "payloads":
            out[name] = list(raws)
            continue
        docs = []
        for raw in raws:
            doc = bson.decode(raw)
            doc = {
                k: (task_key(doc["tenant"], task_id_of(v)) if k == "_id" else v)
                for k, v in doc.items()
            }
            docs.append(bson.encode(doc))
        out[name] = sorted(docs, key=lambda raw: repr(bson.decode(raw)["_id"]))
    return out


async def writes_task_keys() -> bool:
    """Does this version's repositories store tasks under ``task_key(tenant, id)``, or
    under the legacy bare id? Asked of a real store (a task created and read back raw), so
    tests can check that restore writes the form the repositories write."""
    probe = await new_store()
    try:
        await probe.scoped("probe").tasks.create(task_id="probe")
        stored = await probe.database["tasks"].find_one({"tenant": "probe"}, {"_id": 1})
        return bool(stored) and stored["_id"] == task_key("probe", "probe")
    finally:
        await probe.close()


def payload_hex(seed: str) -> str:
    """A payload id in the form mindstore writes (32 hex digits)."""
    return hashlib.sha256(seed.encode()).hexdigest()[:32]


async def seed(store: mindstore.Store, layout: tuple[tuple[str, tuple[str, ...]], ...] = (
        ("acme", ("alice", "bob")), ("beta", ("zed",))), *, messages: int = 2,
        ) -> dict[tuple[str, str], str]:  # fmt: skip
    """Realistic data written through the store: per (tenant, owner) one dialog (task and
    tree node) with a few messages, one of them large enough to become a payload, and a
    fork of the first dialog of each tenant. Returns the root dialog ids."""
    store.offload_threshold = 200
    ids = {}
    for tenant, owners in layout:
        scoped = store.scoped(tenant)
        for owner in owners:
            record = await scoped.dialogs.create(owner, title=f"{tenant} {owner}")
            for i in range(messages):
                await scoped.tasks.add_human_message(record.id, f"message {i} from {owner}")
            await scoped.tasks.add_human_message(record.id, f"attachment of {owner}: " + "x" * 300)
            ids[(tenant, owner)] = record.id
        first = ids[(tenant, owners[0])]
        await scoped.dialogs.fork(first, last_n=2)
    return ids


def read_file_records(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rb") as handle:
        return [decode_line(line) for line in handle]


def rewrite_file(
    backup: Path, name: str, records: list[dict[str, Any]], **manifest_changes: Any
) -> None:
    """Replace one collection file and update the manifest consistently (re-signed), as a
    buggy or malicious writer would: only the content checks can catch what is wrong."""
    file = backup / f"{name}.jsonl.gz"
    # ASCII JSON: a forger may write "\ud800", which UTF-8 cannot hold but JSON can
    data = gzip.compress(
        b"".join(json.dumps(to_ejson(r), separators=(",", ":")).encode() + b"\n" for r in records),
        mtime=0,
    )
    file.write_bytes(data)
    manifest = json.loads((backup / "manifest.json").read_text())
    entry = manifest["collections"][name]
    entry.update(count=len(records), bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
    manifest.update(manifest_changes)
    resign(backup, manifest)


def resign(backup: Path, manifest: dict[str, Any]) -> None:
    manifest["manifest_sha256"] = manifest_checksum(manifest)
    (backup / "manifest.json").write_text(json.dumps(manifest, indent=2))


# --------------------------------------------------------------------------- strategies

_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_key_text = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=8
)
keys = st.one_of(
    st.sampled_from(
        [
            "$ref",
            "$id",
            "$schema",
            "$date",
            "$numberLong",
            "$oid",
            "$binary",
            "$regex",
            "$undefined",
            "$code",
            "$scope",
            "$",
            "~esc",
            "~dbref",
            "",
            "a.b",
            "role",
            "type",
        ]
    ),
    _key_text,
)
_utc_ms = st.datetimes(
    min_value=dt.datetime(1, 1, 1),
    max_value=dt.datetime(9999, 12, 31, 23, 59, 59),
).map(lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000, tzinfo=dt.UTC))
_decimals = st.one_of(
    st.sampled_from(
        [
            "NaN",
            "-NaN",
            "Infinity",
            "-Infinity",
            "-0",
            "0E-6176",
            "1.10",
            "9.999999999999999999999999999999999E+6144",
        ]
    ),
    st.builds(lambda m, e: f"{m}E{e}", st.integers(-(10**33), 10**33), st.integers(-6000, 6000)),
).map(Decimal128)
_binaries = st.one_of(
    st.binary(max_size=20),  # subtype 0 (pymongo hands it back as bytes)
    st.builds(Binary, st.binary(min_size=16, max_size=16), st.sampled_from([3, 4])),
    st.builds(Binary, st.binary(max_size=20), st.sampled_from([1, 5, 6, 0x80, 0xFF])),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1).map(Int64),
    st.floats(allow_nan=True, allow_infinity=True),
    st.binary(min_size=8, max_size=8).map(lambda b: struct.unpack("<d", b)[0]),  # any bits
    _decimals,
    st.binary(min_size=16, max_size=16).map(Decimal128.from_bid),  # any 128 bits
    _text,
    _binaries,
    _utc_ms,
    st.builds(ObjectId),
    st.builds(Regex, _text.filter(lambda s: "\x00" not in s), st.sampled_from(["", "i", "imsx"])),
    st.builds(Timestamp, st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1)),
    st.sampled_from([MinKey(), MaxKey()]),
    st.builds(Code, _text.filter(lambda s: "\x00" not in s)),
)


def values(max_leaves: int = 24) -> st.SearchStrategy[Any]:
    def extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return st.one_of(
            st.lists(children, max_size=4),
            st.dictionaries(keys, children, max_size=4),
            # a JSON schema reference: pymongo reads {"$ref": str, "$id": ...} as a DBRef
            st.builds(lambda ref, ident: {"$ref": ref, "$id": ident}, _text, children),
            st.builds(lambda ref, schema: {"$ref": ref, "$schema": schema}, _text, children),
            st.builds(
                lambda code, scope: Code(code, scope),
                st.just("f()"),
                st.dictionaries(keys, children, max_size=2),
            ),
        )

    return st.recursive(scalars, extend, max_leaves=max_leaves)


_roles = st.one_of(st.sampled_from(["user", "assistant", "tool", "system", "taskentry"]), _text)
messages = st.lists(
    st.fixed_dictionaries(
        {
            "role": _roles,
            "id": _text,
            "content": st.lists(st.dictionaries(keys, values(8), max_size=3), max_size=2),
        },
        optional={"metadata": values(8), "started_ts": st.floats(0, 2e9), "usage": values(6)},
    ),
    max_size=4,
)
