"""Saving and loading an embedded database to one file, so separate CLI runs share data.

The file is gzip-compressed JSON lines in canonical Extended JSON (`bson.json_util` with
`CANONICAL_JSON_OPTIONS`), lossless for int64, Decimal128, binary, datetimes and regexes::

    {"format": "mindstore-embedded-snapshot", "version": 1, "database": ..., ...}
    {"collection": "tasks", "count": 2, "indexes": [{"name": ..., "key": [[field, 1]], ...}]}
    <document>
    <document>
    {"collection": "dialog_nodes", "count": 0, "indexes": []}
    {"end": true, "collections": 2, "documents": 2}

User keys that start with ``$`` (``{"$ref": "#/defs/x", "$id": ...}`` inside a tool's JSON
schema, ``{"$date": ...}`` typed by a user) would be read back by Extended JSON as a DBRef,
a date, an int... so every mapping that has such a key is written escaped as
``{"~esc": [[key, value], ...]}`` (and so is any mapping with a key ``"~esc"`` or
``"~dbref"`` itself), which reads back unambiguously. DBRefs are written as
``{"~dbref": [["$ref", ...], ["$id", ...], ...]}``. (pymongo itself decodes any subdocument
with a string ``$ref`` and an ``$id`` as a `bson.DBRef`, on both backends.)

Writes are atomic (a temporary file in the same folder, fsync, `os.replace`); the file is
created readable by its owner only. Loading a missing or empty file is a no-op; a corrupt
one raises `ConfigurationError` and leaves the database untouched. Both run synchronously
inside the event loop, so no other coroutine writes in the middle of a snapshot.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import gzip
import os
import tempfile
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from bson import DBRef, json_util
from bson.json_util import CANONICAL_JSON_OPTIONS

from ..errors import ConfigurationError
from .embedded import EmbeddedDatabase

__all__ = ["FORMAT", "VERSION", "load_snapshot", "save_snapshot"]

FORMAT = "mindstore-embedded-snapshot"
VERSION = 1
ESCAPE_KEY = "~esc"
DBREF_KEY = "~dbref"
_MARKERS = (ESCAPE_KEY, DBREF_KEY)

_LOAD_OPTIONS = CANONICAL_JSON_OPTIONS.with_options(tz_aware=True, tzinfo=_dt.UTC)
_INDEX_OPTIONS = ("unique", "sparse", "partialFilterExpression", "expireAfterSeconds")


def _escape(value: Any) -> Any:
    if isinstance(value, DBRef):
        # pymongo decodes any subdocument with a string "$ref" and an "$id" as a DBRef
        # (a JSON schema's {"$ref": ..., "$id": ...} too): keep it one, extras and all
        return {DBREF_KEY: [[k, _escape(v)] for k, v in value.as_doc().items()]}
    if isinstance(value, Mapping):
        if any(isinstance(k, str) and (k.startswith("$") or k in _MARKERS) for k in value):
            return {ESCAPE_KEY: [[k, _escape(v)] for k, v in value.items()]}
        return {k: _escape(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_escape(v) for v in value]
    return value


def _unescape(value: Any) -> Any:
    if isinstance(value, dict):
        if len(value) == 1:
            ((key, pairs),) = value.items()
            if key in _MARKERS and isinstance(pairs, list):
                doc = {k: _unescape(v) for k, v in pairs}
                if key == DBREF_KEY:
                    return DBRef(doc.pop("$ref"), doc.pop("$id"), doc.pop("$db", None), **doc)
                return doc
        return {k: _unescape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unescape(v) for v in value]
    return value


def _dumps(obj: Any) -> bytes:
    return (json_util.dumps(obj, json_options=CANONICAL_JSON_OPTIONS) + "\n").encode("utf-8")


def _require_embedded(database: Any) -> EmbeddedDatabase:
    from .proxy import unwrap

    database = unwrap(database)  # a store's database is guarded (`backends.transient`)
    if not isinstance(database, EmbeddedDatabase):
        raise ConfigurationError(
            "data files are for the embedded backend only; to copy a MongoDB database "
            "use mindstore's backup and restore"
        )
    return database


def _lines(database: EmbeddedDatabase) -> Iterator[bytes]:
    sync_db = database.delegate
    names = sorted(sync_db.list_collection_names())
    total = 0
    yield _dumps(
        {
            "format": FORMAT,
            "version": VERSION,
            "database": database.name,
            "created_at": _dt.datetime.now(_dt.UTC),
            "collections": len(names),
        }
    )
    for name in names:
        coll = sync_db.get_collection(name)
        docs = list(coll._store.documents)  # the stored documents, in insertion order
        indexes = []
        for index_name, info in coll.index_information().items():
            if index_name == "_id_":
                continue
            spec: dict[str, Any] = {"name": index_name, "key": [list(k) for k in info["key"]]}
            for option in _INDEX_OPTIONS:
                if info.get(option) is not None:
                    spec[option] = info[option]
            indexes.append(_escape(spec))
        yield _dumps({"collection": name, "count": len(docs), "indexes": indexes})
        for doc in docs:
            yield _dumps(_escape(doc))
        total += len(docs)
    yield _dumps({"end": True, "collections": len(names), "documents": total})


async def save_snapshot(database: Any, path: str | os.PathLike[str]) -> dict[str, int]:
    """Write every collection (documents and indexes) of an embedded database to `path`.

    Returns ``{collection: document count}``.
    """
    db = _require_embedded(database)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    counts: dict[str, int] = {}
    try:
        with os.fdopen(fd, "wb") as raw:
            with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
                for line in _lines(db):
                    gz.write(line)
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    for name in db.delegate.list_collection_names():
        counts[name] = db.delegate.get_collection(name).estimated_document_count()
    return counts


def _parse(path: Path) -> tuple[dict[str, Any], list[tuple[dict[str, Any], list[dict[str, Any]]]]]:
    """Read and check the whole file; raise ValueError (and friends) if it is not right."""
    header: dict[str, Any] | None = None
    collections: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    current: tuple[dict[str, Any], list[dict[str, Any]]] | None = None
    end: dict[str, Any] | None = None
    with gzip.open(path, "rb") as gz:
        for lineno, raw in enumerate(gz, start=1):
            if not raw.strip():
                continue
            if end is not None:
                raise ValueError(f"line {lineno}: data after the end marker")
            obj = json_util.loads(raw.decode("utf-8"), json_options=_LOAD_OPTIONS)
            if not isinstance(obj, dict):
                raise ValueError(f"line {lineno}: not a JSON object")
            if header is None:
                if obj.get("format") != FORMAT:
                    raise ValueError("not a mindstore embedded snapshot (bad header)")
                if obj.get("version") != VERSION:
                    raise ValueError(f"unsupported snapshot version {obj.get('version')!r}")
                header = obj
                continue
            if current is not None and len(current[1]) < current[0]["count"]:
                current[1].append(_unescape(obj))
                continue
            if "collection" in obj:
                if not isinstance(obj["collection"], str) or not isinstance(obj.get("count"), int):
                    raise ValueError(f"line {lineno}: bad collection line")
                if not isinstance(obj.get("indexes", []), list):
                    raise ValueError(f"line {lineno}: bad index list")
                current = (obj, [])
                collections.append(current)
            elif obj.get("end") is True:
                end = obj
            else:
                raise ValueError(f"line {lineno}: unexpected line")
    if header is None:
        raise ValueError("empty snapshot (no header)")
    if end is None:
        raise ValueError("truncated snapshot (no end marker)")
    if current is not None and len(current[1]) != current[0]["count"]:
        raise ValueError("truncated snapshot (missing documents)")
    total = sum(len(docs) for _, docs in collections)
    if end.get("collections") != len(collections) or end.get("documents") != total:
        raise ValueError("snapshot counts do not match its end marker")
    return header, collections


async def load_snapshot(database: Any, path: str | os.PathLike[str]) -> dict[str, int]:
    """Load a file written by `save_snapshot` into an embedded database.

    Each collection in the file replaces the collection of that name (documents and
    indexes); other collections are left alone. A missing or empty file loads nothing.
    Returns ``{collection: document count}`` of what was loaded.
    """
    db = _require_embedded(database)
    source = Path(path)
    try:
        # the embedded backend is in-process and synchronous: its file is read on the loop
        if not source.exists() or source.stat().st_size == 0:  # noqa: ASYNC240
            return {}
    except OSError as exc:
        raise ConfigurationError(f"cannot read embedded data file {source}: {exc}") from exc
    try:
        _, collections = _parse(source)
    except (
        OSError,
        EOFError,
        zlib.error,
        ValueError,
        TypeError,
        KeyError,
        UnicodeDecodeError,
    ) as exc:
        raise ConfigurationError(
            f"embedded data file {source} is corrupt or not a mindstore data file: {exc}"
        ) from exc
    sync_db = db.delegate
    counts: dict[str, int] = {}
    for meta, docs in collections:
        name = meta["collection"]
        sync_db.drop_collection(name)
        coll: Any = sync_db.get_collection(name)
        if name not in sync_db.list_collection_names():
            sync_db.create_collection(name)
        if docs:
            coll.insert_many(docs)  # before the indexes: unique checks are then O(n)
        for spec in meta.get("indexes", []):
            spec = _unescape(spec)
            options = {k: spec[k] for k in _INDEX_OPTIONS if spec.get(k) is not None}
            coll.create_index([tuple(k) for k in spec["key"]], name=spec["name"], **options)
        counts[name] = len(docs)
    return counts
