"""A data-subject export: everything the store holds about one owner, in a folder (I/O).

Read through the owner's scoped view (`store.scoped(tenant, owner)`), so nothing of
another owner can enter it:

* ``conversations.jsonl``: every task of the owner, one line each, every message whole
  (the ``jsonl`` export format): chats, dialog forks, the framework integrations'
  sessions and the messages of the owner's LangGraph threads (they are tasks);
* ``dialogs.jsonl``: the dialog-tree node of each of those tasks that has one;
* ``agents.jsonl``: the stored state of each agent of the owner (aliases, active one);
* ``langgraph_threads.jsonl``: each LangGraph thread of the owner: its id, the tasks
  holding its messages, its last activity, and its checkpoints (id, parent, metadata and
  channel values as JSON) when the `langgraph` extra is installed;
* ``memories.jsonl``: the owner's long-term memory items (the LangGraph store's,
  `mindstore.memory`): namespace, key, value and times;
* ``manifest.json``: tenant, owner, time, and per file its records, bytes and sha256, so
  the receiver can check what arrived.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from mindstore.backup.threads import find_threads
from mindstore.clock import utcnow
from mindstore.errors import NotFound, ValidationError
from mindstore.exports.lines import ExportFormat, conversation_line
from mindstore.exports.reader import conversations, messages_of
from mindstore.memory import MemoryItems
from mindstore.store import Store, TenantStore
from mindstore.validation import check_owner

__all__ = ["SubjectExport", "export_subject"]

Progress = Callable[[str], None]


@dataclass
class SubjectExport:
    """What `export_subject` wrote: the folder and the manifest's content."""

    folder: Path
    manifest: dict[str, Any] = field(default_factory=dict)


def _plain(value: Any) -> Any:
    """`value` as JSON: pydantic models dumped, times in ISO 8601, bytes in base64."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bytes | bytearray):
        return {"base64": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, set | frozenset | tuple):
        return [_plain(v) for v in value]
    return repr(value)


class _File:
    """One file of the export, its records counted and its bytes hashed as written."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.handle = path.open("wb")
        self.sha = hashlib.sha256()
        self.records = 0
        self.bytes = 0

    def write(self, record: Any) -> None:
        line = (json.dumps(record, default=_plain, ensure_ascii=False) + "\n").encode()
        self.handle.write(line)
        self.sha.update(line)
        self.records += 1
        self.bytes += len(line)

    def close(self) -> dict[str, Any]:
        self.handle.close()
        return {"records": self.records, "bytes": self.bytes, "sha256": self.sha.hexdigest()}


async def _threads(store: Store, view: TenantStore, owner: str) -> Iterable[dict[str, Any]]:
    found = await find_threads(store.database, view.tenant, owner)
    saver = _saver(view)
    out = []
    for prefix in sorted(found):
        thread = found[prefix]
        entry: dict[str, Any] = {
            "thread_id": thread.thread_id,
            "tasks": sorted(thread.tasks),
            "last_active": thread.last_active,
        }
        if saver is not None and thread.thread_id is not None:
            config = {"configurable": {"thread_id": thread.thread_id}}
            entry["checkpoints"] = [
                {
                    "checkpoint_ns": t.config["configurable"].get("checkpoint_ns", ""),
                    "checkpoint_id": t.config["configurable"].get("checkpoint_id"),
                    "parent_checkpoint_id": (t.parent_config or {})
                    .get("configurable", {})
                    .get("checkpoint_id"),
                    "metadata": t.metadata,
                    "channel_values": t.checkpoint.get("channel_values", {}),
                }
                async for t in saver.alist(config)
            ]
        out.append(entry)
    return out


def _saver(view: TenantStore) -> Any:
    """The owner's LangGraph saver, or None without the `langgraph` extra."""
    try:
        from mindstore.integrations.langgraph import MindstoreSaver
    except ImportError:
        return None
    return MindstoreSaver(view)


def _empty_folder(target: Path) -> Path:
    """`target`, made if missing; refused if it holds anything (never mixed with old files)."""
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ValidationError(f"folder: {str(target)[:200]!r} exists and is not empty")
    target.mkdir(parents=True, exist_ok=True)
    return target


async def export_subject(
    store: Store,
    tenant: str,
    owner: str,
    folder: str | Path,
    *,
    progress: Progress | None = None,
) -> SubjectExport:
    """Write everything the store holds about `owner` of `tenant` into `folder`.

    `folder` must not exist or be empty (an export never mixes with older files).

    Raises:
        ValidationError: A bad tenant or owner, or a folder that holds files.
        KeyShredded: The tenant's keys were destroyed.
        KeyringRequired: A sealed tenant opened without its keyring.
    """
    check_owner(owner, "owner")
    view = store.scoped(tenant, owner)
    target = _empty_folder(Path(folder))
    say = progress or (lambda _line: None)
    files = {
        name: _File(target / name)
        for name in (
            "conversations.jsonl",
            "dialogs.jsonl",
            "agents.jsonl",
            "langgraph_threads.jsonl",
            "memories.jsonl",
        )
    }
    messages = 0
    try:
        async for record in conversations(view, owner=owner):
            history = await messages_of(view, record)
            messages += len(history)
            files["conversations.jsonl"].write(
                conversation_line(record, history, ExportFormat.jsonl)
            )
            try:
                node = await view.dialogs.node(record.id)
            except NotFound:
                node = None
            if node is not None:
                files["dialogs.jsonl"].write(node)
            count = files["conversations.jsonl"].records
            if count % 100 == 0:
                say(f"export: {count} conversations, {messages} messages")
        for name in await view.agents.list():
            files["agents.jsonl"].write(await view.agents.state(name))
        for thread in await _threads(store, view, owner):
            files["langgraph_threads.jsonl"].write(thread)
        for entry in await MemoryItems.of(store, tenant, owner=owner).under(()):
            files["memories.jsonl"].write(asdict(entry.item))
    finally:
        written = {name: f.close() for name, f in files.items()}
    manifest = {
        "kind": "mindstore data-subject export",
        "tenant": tenant,
        "owner": owner,
        "created_at": utcnow().isoformat(),
        "messages": messages,
        "files": written,
    }
    (target / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    say(f"export: done, {written['conversations.jsonl']['records']} conversations")
    return SubjectExport(target, manifest)
