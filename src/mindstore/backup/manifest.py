"""The backup format: file names, the manifest and its checksum, the scope of a backup.

See docs/backup.md for the complete description. In short, a backup (a directory, or an
uncompressed tar archive with the same members at its root) holds::

    manifest.json
    task_pages.jsonl.gz       (format 2 and 3: sealed pages of paged tasks)
    tasks.jsonl.gz
    dialog_nodes.jsonl.gz
    payloads.jsonl.gz
    langgraph_checkpoints.jsonl.gz, langgraph_writes.jsonl.gz, langgraph_blobs.jsonl.gz,
    agents.jsonl.gz, policies.jsonl.gz     (format 3 only)

and `manifest.json` is a JSON object::

    {"format": "mindstore-backup", "format_version": 2, "mindstore_version": "0.1.0",
     "created_at": "2026-11-22T17:00:00.000Z", "completed_at": "...",
     "encoding": {...}, "source": {...},
     "scope": {"tenant": null, "owner": null, "task_ids": null, "since": null},
     "tenants": ["acme"], "messages": 1200, "missing_task_ids": [],
     "collections": {"task_pages": {...},
                     "tasks": {"file": "tasks.jsonl.gz", "count": 12, "bytes": 4711,
                               "sha256": "..."}, "dialog_nodes": {...}, "payloads": {...}},

     "manifest_sha256": "..."}

Format 1 (a backup without sealed pages) has no ``task_pages`` entry or file; format 3
(a backup holding LangGraph threads, agents or policies) has every collection of the
registry (`mindstore.registry`), some maybe empty.

``manifest_sha256`` is the sha256 (hex) of the manifest without that key, serialised as
``json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`` in UTF-8.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from mindstore.errors import MindstoreError
from mindstore.ids import KEY_SEPARATOR, check_key, is_name
from mindstore.registry import REGISTRY, first_holding

from .errors import BackupCorrupt, BackupUnreadable, BackupVersionError

__all__ = [
    "COLLECTIONS",
    "FILE_NAMES",
    "FORMAT",
    "FORMAT_VERSION",
    "MANIFEST_NAME",
    "READABLE_VERSIONS",
    "VERSION_COLLECTIONS",
    "Manifest",
    "Scope",
    "format_time",
    "manifest_checksum",
    "parse_time",
]

FORMAT = "mindstore-backup"
FORMAT_VERSION = 5
"""The newest format this release writes and reads. Each backup is written in the oldest
format that holds its records, so an older release reads every backup it could: one
without sealed pages is format 1 (the format of releases before paged storage), one with
pages format 2 (adds ``task_pages``), one with LangGraph threads, agents or policies
format 3 (adds those collections, `mindstore.registry`), one with an encrypted tenant's
wrapped data keys format 4 (adds ``data_keys``), one with long-term memory items format 5
(adds ``memory_items``)."""
READABLE_VERSIONS = (1, 2, 3, 4, 5)
MANIFEST_NAME = "manifest.json"
#: Collections in the order verify reads them (the registry's): the pages first (verify
#: folds a paged task's header over them when it reaches the task), then the tasks (the
#: others refer to them), then threads, agents and policies.
COLLECTIONS: tuple[str, ...] = tuple(entry.name for entry in REGISTRY)
VERSION_COLLECTIONS: dict[int, tuple[str, ...]] = {
    version: first_holding(version) for version in READABLE_VERSIONS
}
FILE_NAMES: dict[str, str] = {entry.name: entry.file for entry in REGISTRY}
ENCODING: dict[str, str] = {
    "records": "jsonl",
    "json": "extended-json-v2-canonical",
    "escape": "mindstore-escape-1",
    "compression": "gzip",
}
CHECKSUM_KEY = "manifest_sha256"


def format_time(value: _dt.datetime | None) -> str | None:
    """UTC, millisecond precision, ``Z`` suffix (``2026-11-22T17:00:00.000Z``)."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=_dt.UTC)
    value = value.astimezone(_dt.UTC)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def parse_time(text: str) -> _dt.datetime:
    """An ISO 8601 time; a time without an offset is UTC. Raises ValueError."""
    value = _dt.datetime.fromisoformat(text.strip().replace("z", "Z"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=_dt.UTC)
    return value.astimezone(_dt.UTC)


def check_encoding(encoding: Any) -> None:
    """The manifest's ``encoding`` must be exactly the one this release reads and writes:
    a backup that declares another compression or record format cannot be read as if it
    were gzip JSON lines (`BackupVersionError`, like an unknown format version)."""
    if not isinstance(encoding, dict):
        raise BackupCorrupt("manifest: encoding must be an object")
    for key, value in encoding.items():
        if ENCODING.get(key) != value:
            raise BackupVersionError(
                f"backup encoding {key}={value!r:.60} is not supported (this mindstore reads "
                f"{', '.join(f'{k}={v}' for k, v in ENCODING.items())})"
            )
    missing = sorted(set(ENCODING) - set(encoding))
    if missing:
        raise BackupCorrupt(f"manifest: encoding lacks {', '.join(missing)}")


def is_key(value: Any) -> bool:
    try:
        check_key(value)
    except MindstoreError:
        return False
    return True


def is_task_ref(value: Any) -> bool:
    """A task in a backup scope: its per-tenant key ``tenant/id`` (or, in backups written
    before per-tenant keys, a bare task id)."""
    if not isinstance(value, str):
        return False
    return all(is_key(part) for part in value.split(KEY_SEPARATOR, 1))


def manifest_checksum(data: dict[str, Any]) -> str:
    body = {k: v for k, v in data.items() if k != CHECKSUM_KEY}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Scope:
    """Which tasks a backup holds; dialog nodes and payloads follow their tasks.

    Every condition given must hold (they combine with AND); none given = everything.
    """

    tenant: str | None = None
    owner: str | None = None
    task_ids: tuple[str, ...] | None = None
    since: _dt.datetime | None = None

    @property
    def kind(self) -> str:
        """``all``, or the conditions joined by ``+`` (``tenant+owner+since``)."""
        names = [
            name
            for name, value in (
                ("tenant", self.tenant),
                ("owner", self.owner),
                ("tasks", self.task_ids),
                ("since", self.since),
            )
            if value is not None
        ]
        return "+".join(names) or "all"

    def task_filter(self) -> dict[str, Any]:
        query: dict[str, Any] = {}
        if self.tenant is not None:
            query["tenant"] = self.tenant
        if self.owner is not None:
            query["owner"] = self.owner
        if self.task_ids is not None:
            query["_id"] = {"$in": list(self.task_ids)}
        if self.since is not None:
            query["updated_at"] = {"$gte": self.since}
        return query

    def to_dict(self) -> dict[str, Any]:
        return {
            "tenant": self.tenant,
            "owner": self.owner,
            "task_ids": list(self.task_ids) if self.task_ids is not None else None,
            "since": format_time(self.since),
        }

    @classmethod
    def from_dict(cls, data: Any) -> Scope:
        if not isinstance(data, dict):
            raise BackupCorrupt("manifest: scope must be an object")
        tenant, owner, ids, since = (data.get(k) for k in ("tenant", "owner", "task_ids", "since"))
        for name, value, valid in (
            ("tenant", tenant, is_key),
            ("owner", owner, is_name),
            ("since", since, lambda v: isinstance(v, str)),
        ):
            if value is not None and not valid(value):
                raise BackupCorrupt(f"manifest: scope.{name} is not a valid {name}: {value!r:.60}")
        if ids is not None and not (isinstance(ids, list) and all(is_task_ref(i) for i in ids)):
            raise BackupCorrupt("manifest: scope.task_ids must be a list of task ids or null")
        try:
            when = parse_time(since) if since is not None else None
        except ValueError as exc:
            raise BackupCorrupt(f"manifest: scope.since is not a time: {since!r}") from exc
        return cls(tenant, owner, tuple(ids) if ids is not None else None, when)

    def describe(self) -> str:
        parts = []
        if self.tenant is not None:
            parts.append(f"tenant {self.tenant}")
        if self.owner is not None:
            parts.append(f"owner {self.owner}")
        if self.task_ids is not None:
            parts.append(f"{len(self.task_ids)} task id(s)")
        if self.since is not None:
            parts.append(f"updated since {format_time(self.since)}")
        return ", ".join(parts) or "everything"


@dataclass
class FileEntry:
    file: str
    count: int
    bytes: int
    sha256: str

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "count": self.count, "bytes": self.bytes, "sha256": self.sha256}


@dataclass
class Manifest:
    """What `backup` wrote and `verify` checks against."""

    scope: Scope
    collections: dict[str, FileEntry]
    tenants: list[str]
    messages: int
    created_at: _dt.datetime
    completed_at: _dt.datetime
    mindstore_version: str
    source: dict[str, Any] = field(default_factory=dict)
    missing_task_ids: list[str] = field(default_factory=list)
    format_version: int = FORMAT_VERSION
    path: str | None = None

    @property
    def names(self) -> tuple[str, ...]:
        """The collections this backup holds, in the order verify reads them."""
        return tuple(name for name in COLLECTIONS if name in self.collections)

    @property
    def counts(self) -> dict[str, int]:
        return {name: entry.count for name, entry in self.collections.items()}

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "format": FORMAT,
            "format_version": self.format_version,
            "mindstore_version": self.mindstore_version,
            "created_at": format_time(self.created_at),
            "completed_at": format_time(self.completed_at),
            "encoding": dict(ENCODING),
            "source": dict(self.source),
            "scope": self.scope.to_dict(),
            "tenants": list(self.tenants),
            "messages": self.messages,
            "missing_task_ids": list(self.missing_task_ids),
            "collections": {name: e.to_dict() for name, e in self.collections.items()},
        }
        data[CHECKSUM_KEY] = manifest_checksum(data)
        return data

    def to_json(self) -> bytes:
        return (json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n").encode("utf-8")

    @classmethod
    def from_bytes(cls, raw: bytes) -> Manifest:
        """Parse and check a manifest; raise the typed error `verify` reports."""
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise BackupCorrupt(f"manifest.json is not valid JSON: {exc}") from exc
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise BackupUnreadable(
                f'not a mindstore backup (manifest.json has no "format": "{FORMAT}")'
            )
        version = data.get("format_version")
        if version not in READABLE_VERSIONS or type(version) is not int:
            raise BackupVersionError(
                f"backup format version {version!r} is not supported (this mindstore reads "
                f"versions {', '.join(map(str, READABLE_VERSIONS))})"
            )
        expected = data.get(CHECKSUM_KEY)
        if not isinstance(expected, str) or manifest_checksum(data) != expected:
            raise BackupCorrupt("manifest.json was modified (manifest_sha256 does not match)")
        check_encoding(data.get("encoding"))
        try:
            collections = data["collections"]
            expected = VERSION_COLLECTIONS[version]
            if not isinstance(collections, dict) or set(collections) != set(expected):
                raise BackupCorrupt(
                    f"manifest: collections of format {version} must be exactly "
                    f"{', '.join(expected)}"
                )
            entries = {}
            for name in expected:
                entry = collections[name]
                if not (
                    isinstance(entry, dict)
                    and entry.get("file") == FILE_NAMES[name]
                    and type(entry.get("count")) is int
                    and entry["count"] >= 0
                    and type(entry.get("bytes")) is int
                    and entry["bytes"] >= 0
                    and isinstance(entry.get("sha256"), str)
                    and len(entry["sha256"]) == 64
                ):
                    raise BackupCorrupt(f"manifest: bad entry for collection {name}")
                entries[name] = FileEntry(
                    entry["file"], entry["count"], entry["bytes"], entry["sha256"].lower()
                )
            tenants = data["tenants"]
            if not (isinstance(tenants, list) and all(is_key(t) for t in tenants)):
                raise BackupCorrupt("manifest: tenants must be a list of tenant ids")
            messages = data.get("messages", 0)
            if type(messages) is not int:
                raise BackupCorrupt("manifest: messages must be an integer")
            missing = data.get("missing_task_ids") or []
            created = parse_time(data["created_at"])
            completed = parse_time(data.get("completed_at") or data["created_at"])
            return cls(
                scope=Scope.from_dict(data["scope"]),
                collections=entries,
                tenants=list(tenants),
                messages=messages,
                created_at=created,
                completed_at=completed,
                mindstore_version=str(data.get("mindstore_version")),
                source=source if isinstance(source := data.get("source"), dict) else {},
                missing_task_ids=list(missing) if isinstance(missing, list) else [],
                format_version=version,
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise BackupCorrupt(f"manifest: missing or malformed field: {exc}") from exc
