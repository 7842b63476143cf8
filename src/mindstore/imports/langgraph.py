"""`langgraph`: a LangGraph `SqliteSaver` file, `PostgresSaver` tables or `MongoDBSaver`
collections.

The source is a SQLite file, a PostgreSQL URL (``postgresql://user:pw@host/DB``,
`postgres_sources`), or a MongoDB URI (``mongodb://host/DB#checkpoints``; the writes
collection is `checkpoint_writes` unless named after a comma) or `MongoSource`. Only the
opening of the saver differs: every thread of it (the saver's `list(None)`, the library's
own reader) becomes the same thread of `MindstoreSaver`: each checkpoint, oldest first
within its namespace, is put with its metadata, its parent and the channel versions it
changed from its parent (what a run passes as `new_versions`), then its pending writes,
task by task with the task path the source records. `MindstoreSaver.alist` then gives
back the tuples the source's saver gives (`langgraph_values.canonical_tuple` compares
them). A checkpoint already served as the source has it is skipped, so a rerun writes
nothing and a crashed run resumes.
"""

from __future__ import annotations

import sqlite3
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.sqlite import SqliteSaver

from mindstore.imports.driver import Conversation, UnreadableSource, text_source
from mindstore.imports.langgraph_values import canonical_tuple, unstorable
from mindstore.imports.mongo_sources import (
    MongoSource,
    is_mongo,
    mongo_source,
    require_collection,
)
from mindstore.imports.postgres_sources import is_postgres, open_postgres
from mindstore.imports.sqlite_files import require_tables, sqlite_file
from mindstore.integrations.langgraph import MindstoreSaver
from mindstore.store import TenantStore

__all__ = ["KIND", "LangGraphKind"]

TABLES = {
    "checkpoints": {"thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id",
                    "type", "checkpoint", "metadata"},
    "writes": {"thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx", "channel",
               "type", "value"},
}  # fmt: skip
POSTGRES_TABLES = {
    "checkpoints": TABLES["checkpoints"],
    "checkpoint_blobs": {"thread_id", "checkpoint_ns", "channel", "version", "type", "blob"},
    "checkpoint_writes": TABLES["writes"] - {"value"} | {"blob"},
}
"""`PostgresSaver`'s tables (its channel values are in `checkpoint_blobs`)."""
MONGO_CHECKPOINTS, MONGO_WRITES = "checkpoints", "checkpoint_writes"
"""`MongoDBSaver`'s default collection names."""
MONGO_FIELDS = (
    ("thread_id", "checkpoint_ns", "checkpoint_id", "checkpoint", "metadata"),
    ("thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx", "channel"),
)
WRITE_KEYS = ("thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "task_path")
Paths = dict[tuple[str, str, str, str], str]
"""Task paths by (thread, namespace, checkpoint, task)."""
Opened = tuple[BaseCheckpointSaver[Any], str, Callable[[], Iterable[Sequence[Any]]]]
"""An opened source: its saver, its name, and a reader of its task paths' rows."""
MESSAGES = "messages"
"""The channel whose length the receipt counts as messages (`MindstoreSaver`'s default)."""


def _order(item: CheckpointTuple) -> tuple[str, str]:
    configurable = item.config["configurable"]
    return (configurable.get("checkpoint_ns") or "", configurable["checkpoint_id"])


class Thread:
    """One thread: its checkpoint tuples (namespace, then id order) and task paths."""

    def __init__(self, tuples: list[CheckpointTuple], paths: dict[tuple[str, str, str], str]):
        self.tuples = sorted(tuples, key=_order)
        self.paths = paths


def counts_of(tuples: list[CheckpointTuple]) -> dict[str, int]:
    """Checkpoints, pending writes and the messages the thread's latest root checkpoint
    holds."""
    root = [item for item in tuples if not item.config["configurable"].get("checkpoint_ns")]
    latest = root[-1].checkpoint["channel_values"].get(MESSAGES) if root else None
    return {
        "checkpoints": len(tuples),
        "writes": sum(len(item.pending_writes or []) for item in tuples),
        "messages": len(latest) if isinstance(latest, list) else 0,
    }


class LangGraphKind:
    name = "langgraph"
    owns = False
    owner_fields: tuple[str, ...] = ("thread_id",)

    async def read(self, given: str | MongoSource) -> list[Conversation]:
        if is_mongo(given):
            opened = self._mongo(given)
        elif is_postgres(given):
            opened = self._postgres(text_source(self.name, given))
        else:
            opened = self._sqlite(text_source(self.name, given))
        with opened as (saver, source, path_rows):
            tuples = self._listed(saver, source)
            for item in tuples:  # refused before anything is written
                if reason := unstorable(item):
                    at = item.config["configurable"]
                    raise UnreadableSource(self.name, source, (
                        f"thread {at['thread_id']!r}, checkpoint {at['checkpoint_id']!r}:"
                        f" {reason}, which LangGraph's serializer cannot store"))  # fmt: skip
            paths: Paths = {}
            for row in path_rows():
                where, ns, checkpoint, task, path = ("" if v is None else str(v) for v in row)
                paths[(where, ns, checkpoint, task)] = path
        threads: dict[str, list[CheckpointTuple]] = defaultdict(list)
        for item in tuples:
            threads[str(item.config["configurable"]["thread_id"])].append(item)
        conversations = []
        for thread_id, items in threads.items():
            thread = Thread(items, {k[1:]: v for k, v in paths.items() if k[0] == thread_id})
            conversations.append(Conversation(
                id=thread_id, canonical=[canonical_tuple(item) for item in thread.tuples],
                counts=counts_of(thread.tuples), payload=thread, fields={"thread_id": thread_id},
            ))  # fmt: skip
        return conversations

    def writer(self, view: TenantStore) -> SaverWriter:
        return SaverWriter(view)

    # Each source differs only in how its saver is opened: an opener yields the saver (its
    # `list(None)` is the reader), the source's name, and the task paths' rows (thread,
    # namespace, checkpoint, task, path), which `CheckpointTuple` does not carry.

    @contextmanager
    def _sqlite(self, source: str) -> Iterator[Opened]:
        """A `SqliteSaver` file, opened read-only."""
        path = sqlite_file(self.name, source)
        columns = require_tables(self.name, path, TABLES)
        connection = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True,
                                     check_same_thread=False)  # fmt: skip
        try:
            saver = SqliteSaver(connection)
            saver.is_setup = True  # the tables are there (checked); never write to a source

            def path_rows() -> Iterable[Sequence[Any]]:
                if "task_path" not in columns["writes"]:
                    return []
                return connection.execute(f"SELECT {', '.join(WRITE_KEYS)} FROM writes")

            yield saver, source, path_rows
        finally:
            connection.close()

    @contextmanager
    def _postgres(self, source: str) -> Iterator[Opened]:
        """`PostgresSaver` tables, through a read-only session (`open_postgres`)."""
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import tuple_row

        connection, columns = open_postgres(self.name, source, POSTGRES_TABLES)
        try:

            def path_rows() -> Iterable[Sequence[Any]]:
                if "task_path" not in columns["checkpoint_writes"]:
                    return []
                with connection.cursor(row_factory=tuple_row) as cursor:
                    return cursor.execute(
                        f"SELECT {', '.join(WRITE_KEYS)} FROM checkpoint_writes"
                    ).fetchall()

            yield PostgresSaver(connection), source, path_rows
        finally:
            connection.close()

    @contextmanager
    def _mongo(self, given: str | MongoSource) -> Iterator[Opened]:
        """`MongoDBSaver` collections. The collection named is the checkpoints one; the
        writes are beside it (`MONGO_WRITES`, or the name after a comma:
        ``#checkpoints,checkpoint_writes``)."""
        from langgraph.checkpoint.mongodb import MongoDBSaver

        where = mongo_source(self.name, given, MONGO_CHECKPOINTS)
        checkpoints, _, writes = where.collection.partition(",")
        writes = writes or MONGO_WRITES
        names = (checkpoints, writes)
        for name, fields in zip(names, MONGO_FIELDS, strict=True):
            require_collection(self.name, replace(where, collection=name), fields)

        def path_rows() -> Iterable[Sequence[Any]]:
            found = where.client[where.database][writes].find({}, dict.fromkeys(WRITE_KEYS, 1))
            return ([row.get(f) for f in WRITE_KEYS] for row in found)

        yield MongoDBSaver(where.client, where.database, checkpoints, writes), str(where), path_rows

    def _listed(self, saver: BaseCheckpointSaver[Any], source: str) -> list[CheckpointTuple]:
        try:
            return list(saver.list(None))
        except Exception as error:  # a row or document the library cannot decode
            raise UnreadableSource(self.name, source, f"unreadable checkpoint ({error})") from None


class SaverWriter:
    def __init__(self, view: TenantStore) -> None:
        self.saver = MindstoreSaver(view)

    async def _served(self, thread_id: str) -> list[CheckpointTuple]:
        where: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        found = [item async for item in self.saver.alist(where)]
        return sorted(found, key=_order)

    async def served(self, conversation: Conversation) -> Any:
        return [canonical_tuple(item) for item in await self._served(conversation.id)]

    async def write(self, conversation: Conversation, step: Callable[[str], None]) -> Counter[str]:
        thread: Thread = conversation.payload
        served = await self._served(conversation.id)
        stored = {_order(item): canonical_tuple(item) for item in served}
        written: Counter[str] = Counter()
        new = conversation.counts["messages"] - counts_of(served)["messages"]
        written["messages"] = max(new, 0)
        by_id = {_order(item): item for item in thread.tuples}
        for item, canonical in zip(thread.tuples, conversation.canonical, strict=True):
            if stored.get(_order(item)) == canonical:
                continue
            ns, checkpoint_id = _order(item)
            parent = (item.parent_config or {}).get("configurable", {}).get("checkpoint_id")
            before = by_id.get((ns, parent)) if parent else None
            old = before.checkpoint["channel_versions"] if before else {}
            versions = item.checkpoint["channel_versions"]
            changed = {name: v for name, v in versions.items() if old.get(name) != v}
            configurable: dict[str, Any] = {"thread_id": conversation.id, "checkpoint_ns": ns}
            if parent:
                configurable["checkpoint_id"] = parent
            await self.saver.aput({"configurable": configurable}, item.checkpoint,
                                  item.metadata, changed)  # fmt: skip
            written["checkpoints"] += 1
            step("checkpoint")
            where = {"thread_id": conversation.id, "checkpoint_ns": ns}
            at: RunnableConfig = {"configurable": {**where, "checkpoint_id": checkpoint_id}}
            tasks: dict[str, list[tuple[str, Any]]] = defaultdict(list)
            for task_id, channel, value in item.pending_writes or []:
                tasks[task_id].append((channel, value))
            for task_id, writes in tasks.items():
                path = thread.paths.get((ns, checkpoint_id, task_id), "")
                await self.saver.aput_writes(at, writes, task_id, path)
                written["writes"] += len(writes)
                step("writes")
        return written


KIND = LangGraphKind()
