"""`agent-framework`: the Microsoft Agent Framework's `FileHistoryProvider` folder.

Each history file of the folder (``<session>.jsonl``, or ``.msgpack`` for the binary
format) is one session: its id is the file's name (decoded as the framework encodes ids
that are not safe file names: ``~session-`` and lowercase base32), its messages are read
with the framework's own `FileHistoryProvider.get_messages`, and saved in one atomic
write to `MindstoreHistoryProvider` under the same session id (the ``default`` file is
the framework's session None). Messages keep their contents (text, function calls and
results, data), author, ids and `additional_properties`.

Not carried: a session whose id was longer than the framework could encode in a file
name (stored under a SHA-256 digest: the id is gone) is imported under the file's name.
"""

from __future__ import annotations

import base64
import binascii
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from agent_framework import FileHistoryProvider, Message

from mindstore.imports.driver import Conversation, UnreadableSource, prefix_rest, text_source
from mindstore.imports.mongo_sources import MongoSource
from mindstore.integrations.agent_framework import MindstoreHistoryProvider
from mindstore.store import TenantStore

__all__ = ["KIND", "AgentFrameworkKind", "session_id_of"]

ENCODED = "~session-"
DIGEST = "sha256-"
FORMATS: dict[str, Literal["json", "msgpack"]] = {".jsonl": "json", ".msgpack": "msgpack"}


def session_id_of(stem: str) -> str:
    """The session id a history file's name stands for (see the module doc)."""
    if not stem.startswith(ENCODED) or DIGEST in stem[len(ENCODED) :][:8]:
        return stem
    encoded = stem[len(ENCODED) :].upper()
    try:
        return base64.b32decode(encoded + "=" * (-len(encoded) % 8)).decode("utf-8")
    except (binascii.Error, ValueError):
        return stem


def history_files(kind: str, folder: Path) -> list[Path]:
    """The folder's history files, by name; `UnreadableSource` when it is no folder."""
    if not folder.is_dir():
        raise UnreadableSource(kind, str(folder), "no such folder")
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in FORMATS)


def dumped(messages: list[Message]) -> list[Any]:
    return [message.to_dict() for message in messages]


class AgentFrameworkKind:
    name = "agent-framework"
    owns = False
    owner_fields: tuple[str, ...] = ("session_id",)

    async def read(self, given: str | MongoSource) -> list[Conversation]:
        source = text_source(self.name, given)
        folder = Path(source)
        files = history_files(self.name, folder)
        if not files:
            raise UnreadableSource(
                self.name,
                source,
                "no history files (.jsonl, .msgpack): not a FileHistoryProvider folder",
            )
        conversations = []
        for file in files:
            provider = FileHistoryProvider(folder, serialization_format=FORMATS[file.suffix])
            session_id = session_id_of(file.stem)
            path = provider._session_file_path(session_id)  # its file name: no public form
            if path != file.resolve():
                raise UnreadableSource(self.name, source, f"{file.name}: not a session file name")
            try:
                messages = await provider.get_messages(session_id)
            except Exception as error:  # the framework's own reader refused the file
                raise UnreadableSource(self.name, source, f"{file.name}: {error}") from None
            conversations.append(Conversation(
                id=session_id, canonical=dumped(messages), counts={"messages": len(messages)},
                payload=messages, fields={"session_id": session_id},
            ))  # fmt: skip
        return conversations

    def writer(self, view: TenantStore) -> HistoryWriter:
        return HistoryWriter(view)


class HistoryWriter:
    def __init__(self, view: TenantStore) -> None:
        self.provider = MindstoreHistoryProvider(view)

    async def served(self, conversation: Conversation) -> Any:
        return dumped(await self.provider.get_messages(conversation.id))

    async def write(self, conversation: Conversation, step: Callable[[str], None]) -> Counter[str]:
        stored = await self.served(conversation)
        rest = prefix_rest(stored, conversation.canonical,
                           f"agent-framework session {conversation.id!r}")  # fmt: skip
        if rest:
            await self.provider.save_messages(conversation.id, conversation.payload[len(stored) :])
            step("messages")
        return Counter(messages=len(rest))


KIND = AgentFrameworkKind()
