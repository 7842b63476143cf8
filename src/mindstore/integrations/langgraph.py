"""`MindstoreSaver`: a LangGraph checkpoint saver whose checkpoints do not copy the history.

A checkpoint saver usually stores every channel value in every checkpoint, so a thread's
`messages` list is stored again at every step and the thread grows with the square of its
length. Here:

* the `messages` channel is a mindstore task (`task_id_for(thread_id)`, the rule every
  adapter uses): each message is appended once, typed (`langchain_messages`: tool calls
  tracked, usage and model kept), and a checkpoint records how many of the task's
  messages it holds (`ms`: count and a fingerprint chain);
* every other channel value is written once per version: a small one (64 bytes or less
  serialized) inside the checkpoint document, a larger one as a blob keyed by the
  checkpoint that wrote it, which every later checkpoint holding that version names;
* each task's pending writes are one document per (checkpoint, task); once the next
  checkpoint has appended the messages a write carried, the write refers to them in the
  task instead of holding a second copy (`langgraph_writes`).

When a step's `messages` list does not extend the stored prefix (a `RemoveMessage`, an
update of an earlier message by id), that version starts a task of its own holding it (one
copy); the steps after it append there. Time travel (`get_state_history`, resuming or
updating an earlier checkpoint) reads the recorded prefix; a branch from an earlier step
continues in its own task (the prefix copied once). Copies are marked as a fork's are
(`origin`; the new task's `metadata.copied_from` names where they came from), so analytics
count each model call once. A list no document can hold is a blob.

Every put and put_writes is exactly once: sent again, right away or after later ones,
it stores nothing new (appends are recognised by message ids and content, tasks created
before by their messages' ids, blobs and writes are written if absent).

On a store with a keyring the three collections are reached through
`crypto.sealed_collection`: serialized values, sealed metadata values and fingerprints are
stored sealed and read opened, ids and keys stay clear (docs/encryption.md, "Integration
data"); a metadata filter then goes to the server only on the keys left clear, and a
retried put stores the same values under fresh nonces.

Async methods are native; the sync ones run them (see `_sync`). Extended capabilities:
list filters, `copy_thread`, `prune` and `delete_for_runs` (`langgraph_admin`). The
saver's pending writes and admin operations reach its collections, tasks and key rules
through one object, `langgraph_storage.ThreadStorage`, never through the saver.
"""

from __future__ import annotations

import random
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from typing import Any

import bson
from langchain_core.messages import BaseMessage, message_to_dict
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
)

from mindstore.collection_names import LANGGRAPH_BLOBS, LANGGRAPH_CHECKPOINTS, LANGGRAPH_WRITES
from mindstore.crypto.integration_fields import METADATA_CLEAR
from mindstore.crypto.keyring import Keyring
from mindstore.crypto.sealed_collection import sealed_collection
from mindstore.errors import NotFound, ValidationError
from mindstore.ids import check_name
from mindstore.integrations import langgraph_admin as admin
from mindstore.integrations import langgraph_documents  # noqa: F401 - registers its documents
from mindstore.integrations import langgraph_keys as keys
from mindstore.integrations import langgraph_writes as pending
from mindstore.integrations._sync import current_loop
from mindstore.integrations.conversation_ids import check_conversation_id
from mindstore.integrations.langchain_messages import from_langchain, to_langchain
from mindstore.integrations.langgraph_keys import message_ids
from mindstore.integrations.langgraph_storage import ThreadStorage, check_ours, mark_copies
from mindstore.integrations.langgraph_sync import SyncForms
from mindstore.model.messages import AnyMessage, MessageBase, Origin
from mindstore.model.storage_form import escape_keys, unescape_keys
from mindstore.operations import operations, through
from mindstore.protocols import SaverView

MARKER = keys.MARKER
CHUNK = 500
INLINE_BYTES = 64
FINGERPRINTS = 20_000


@operations("langgraph", resilience=through("_tasks"))
class MindstoreSaver(SyncForms, BaseCheckpointSaver[int]):
    """A LangGraph `BaseCheckpointSaver` on a mindstore tenant view (see the module doc)."""

    def __init__(
        self, store: SaverView, *, serde: Any = None, messages_channel: str = "messages"
    ) -> None:
        super().__init__(serde=serde)
        self.view = store
        self.tenant: str = store.tenant
        self.owner: str | None = store.owner
        database = store.store.database
        keyring = getattr(store.store, "keyring", None)
        ring = keyring if isinstance(keyring, Keyring) else None  # sealed under a keyring
        self._sealed = ring is not None
        checkpoints, writes, blobs = (
            sealed_collection(database[name], name, ring, self.tenant, database)
            for name in (LANGGRAPH_CHECKPOINTS, LANGGRAPH_WRITES, LANGGRAPH_BLOBS)
        )
        self._tasks = store.tasks  # the operations ledger finds its resilience here
        self.messages_channel = messages_channel
        self._storage = ThreadStorage(
            tenant=self.tenant, owner=self.owner, checkpoints=checkpoints, writes=writes,
            blobs=blobs, tasks=self._tasks, serde=self.serde, messages_channel=messages_channel,
        )  # fmt: skip
        self._loop = current_loop()
        self._fingerprints: OrderedDict[int, tuple[Any, bytes]] = OrderedDict()

    def get_next_version(self, current: int | str | None, channel: None) -> Any:
        """The next channel version: an int (LangGraph's default) on mindstore's own
        threads; a thread imported from a saver with string versions (`SqliteSaver`,
        `PostgresSaver`, `InMemorySaver`: ``"<32-digit counter>.<random>"``) goes on in
        that form, so its versions stay comparable (docs/import-export.md).

        Args:
            current: The channel's current version (None: the thread has none yet).
            channel: Unused (LangGraph's deprecated argument).

        Returns:
            The next version, greater than `current`, in its form.
        """
        if isinstance(current, str):
            return f"{int(current.split('.')[0]) + 1:032}.{random.random():016}"
        return super().get_next_version(current, channel)

    # ------------------------------------------------------------------ where
    def _where(self, config: RunnableConfig | None) -> tuple[str, str, str | None]:
        configurable = (config or {}).get("configurable") or {}
        thread = self._thread(configurable.get("thread_id"))
        ns = configurable.get("checkpoint_ns") or ""
        if ns != "":
            check_name(ns, "checkpoint_ns")
        checkpoint_id = get_checkpoint_id(config) if config else None
        if checkpoint_id is not None:
            keys.check_checkpoint_id(checkpoint_id)
        return thread, str(ns), checkpoint_id

    @staticmethod
    def _thread(thread: Any) -> str:
        """A thread id as LangGraph passes it (a string; an int or a UUID as its text),
        checked like every framework conversation id (`conversation_ids`)."""
        if isinstance(thread, (int, uuid.UUID)) and not isinstance(thread, bool):
            thread = str(thread)
        return check_conversation_id(thread, "thread_id")

    # ------------------------------------------------------------------ put
    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint of a thread (LangGraph's `BaseCheckpointSaver.aput`).

        The checkpoint's messages channel is appended to the thread's messages task (so the
        conversation is an ordinary mindstore task), its other channels stored as blobs by
        version.

        Args:
            config: LangGraph's `RunnableConfig`; `configurable` holds `thread_id` and, optionally,
                `checkpoint_ns` and `checkpoint_id`.
            checkpoint: The checkpoint (`id`, `channel_values`, `channel_versions`, ...).
            metadata: The checkpoint's metadata (`source`, `step`, `parents`, ...).
            new_versions: The channel versions this checkpoint writes.

        Returns:
            The config that names the stored checkpoint.

        Raises:
            ValidationError: A bad thread id, namespace or checkpoint id.
        """
        thread, ns, parent_id = self._where(config)
        checkpoint_id = keys.check_checkpoint_id(checkpoint["id"])
        ident = self._storage.ident(thread)
        prefix = keys.scope_prefix(self.tenant, ident, ns)
        values = checkpoint["channel_values"]
        versions = checkpoint["channel_versions"]
        parent, stored = await self._around(prefix, parent_id, checkpoint_id)
        channel = self.messages_channel
        document: dict[str, Any] = {
            "p": keys.pack_id(parent_id),
            "c": list(self.serde.dumps_typed(keys.pack_checkpoint(checkpoint))),
        }
        blobs: dict[str, str] = {}
        inline: dict[str, Any] = {}
        ms: dict[str, Any] | None = None
        for name in versions:
            if name in new_versions:
                if name not in values:
                    continue
                if name == channel:
                    ms = await self._put_messages(
                        thread, ident, ns, parent, checkpoint_id, values[name]
                    )
                    if ms is not None and not ms.get("b"):
                        continue
                kind, data = self.serde.dumps_typed(values[name])
                if len(data) <= INLINE_BYTES and name != channel:
                    inline[name] = [kind, data]
                    continue
                await self._storage.blobs.update_one(
                    {
                        "_id": keys.blob_key(self.tenant, ident, ns, checkpoint_id, name),
                        "tenant": self.tenant,
                    },
                    {"$setOnInsert": {"t": kind, "b": data}},
                    upsert=True,
                )
                blobs[name] = checkpoint_id
            else:  # as stored for this checkpoint already (a re-put), else as the parent has it
                kept = stored.get("versions") or {}
                source = stored if name in kept and kept[name] == versions[name] else parent
                if name in source.get("b", {}):
                    blobs[name] = source["b"][name]
                if name in source.get("iv", {}):
                    inline[name] = source["iv"][name]
                if name == channel and source.get("ms"):
                    ms = source["ms"]
        for field, value in (("b", blobs), ("iv", inline), ("ms", ms)):
            if value:
                document[field] = value
        document.update(self._metadata_fields(dict(get_checkpoint_metadata(config, metadata))))
        if keys.thread_segment(ident) != thread:
            document["th"] = thread
        if ns:
            document["ns"] = ns
        if self.owner is not None:
            document["o"] = self.owner
        key = prefix + checkpoint_id
        stale = {
            field: ""
            for field in ("b", "iv", "ms", "md", "mdb", "th", "ns")
            if field not in document
        }
        update: dict[str, Any] = {"$set": document}
        if stale:
            update["$unset"] = stale
        await self._storage.checkpoints.update_one(
            {"_id": key, "tenant": self.tenant}, update, upsert=True
        )
        self._storage.heads[prefix] = (
            checkpoint_id,
            {k: document[k] for k in ("ms", "b", "iv") if k in document},
        )
        if ms is not None and not ms.get("b") and parent_id is not None and channel in new_versions:
            start = int((parent.get("ms") or {}).get("n", 0))
            written = [
                keys.blob_key(self.tenant, ident, ns, writer, name)
                for name, writer in (parent.get("b") or {}).items()
                if writer == parent_id
            ]
            await pending.compact(
                self._storage,
                keys.checkpoint_key(self.tenant, ident, ns, parent_id),
                ms.get("t", keys.messages_task_id(ident, ns)),
                start,
                values[channel][start:],
                written,
            )
        return {
            "configurable": {
                "thread_id": thread,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint_id,
            }
        }

    def _metadata_fields(self, metadata: dict[str, Any]) -> dict[str, Any]:
        """Metadata as a document (filterable) when it comes back equal, else serialized."""
        try:
            stored = escape_keys(metadata)
            if unescape_keys(bson.decode(bson.encode({"m": stored}))["m"]) == metadata:
                return {"md": stored}
        except Exception:
            pass
        return {"mdb": list(self.serde.dumps_typed(metadata))}

    async def _around(
        self, prefix: str, parent_id: str | None, checkpoint_id: str
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The parent's `ms`, `b` and `iv`, and the same of the checkpoint itself when it is
        stored already (with its channel `versions`; {} when it is not), in at most one read.

        A put normally follows this saver's last put (its parent) with a newer id: nothing
        to read. Otherwise the checkpoint may be stored already (re-put, by this process or
        another): what it references then is kept for the channels it does not write anew.
        """
        head = self._storage.heads.get(prefix)
        cached = head is not None and parent_id is not None and head[0] == parent_id
        if cached and head is not None and checkpoint_id > head[0]:
            return head[1], {}
        wanted = [prefix + checkpoint_id]
        if parent_id is not None and not cached and parent_id != checkpoint_id:
            wanted.append(prefix + parent_id)
        rows = await self._storage.checkpoints.find(
            {**self._storage.scope(), "_id": {"$in": wanted}}, {"ms": 1, "b": 1, "iv": 1, "c": 1}
        ).to_list(length=None)
        fields: tuple[str, ...] = ("ms", "b", "iv", "c")
        found: dict[str, dict[str, Any]] = {
            row["_id"]: {k: row[k] for k in fields if k in row} for row in rows
        }
        stored = found.get(prefix + checkpoint_id, {})
        if "c" in stored:
            packed = self.serde.loads_typed(tuple(stored.pop("c")))
            stored["versions"] = keys.unpack_checkpoint(packed)["channel_versions"]
        if parent_id is None:
            parent: dict[str, Any] = {}
        elif cached and head is not None:
            parent = head[1]
        else:
            parent = dict(found.get(prefix + parent_id, {}))
            parent.pop("c", None)
        return parent, stored

    # ------------------------------------------------------------------ the messages channel
    async def _put_messages(
        self,
        thread: str,
        ident: str,
        ns: str,
        parent: dict[str, Any],
        checkpoint_id: str,
        value: Any,
    ) -> dict[str, Any] | None:
        """Append what is new to the task and return the record (None: not a list of
        messages, a plain blob).

        The record names the task (`t`; none: the one `keys.messages_task_id` gives, which
        rows stored before `task_id_for` mean too), how many of its messages the
        checkpoint holds (`n`) and their fingerprint chain (`h`). A list that does not
        extend the parent's (a message removed or rewritten) starts a task of its own; one
        that cannot be stored as messages is a blob (`b`, with `f`: the task it came from).
        """
        if not isinstance(value, list) or not all(isinstance(m, BaseMessage) for m in value):
            return None
        fingerprints = keys.chain(self._fingerprint(m) for m in value)
        record: dict[str, Any] = {"n": len(value), "h": fingerprints[-1]}
        implicit = keys.messages_task_id(ident, ns)
        base = parent.get("ms")
        task: str | None
        if base is None:  # the thread's first messages
            base, task = {"n": 0, "h": keys.EMPTY_CHAIN}, self._storage.home(thread, ident, ns)
        else:
            task = None if base.get("b") else base.get("t", implicit)
        source = task if task is not None else base.get("f")
        blob = {**record, "b": 1, **({"f": source} if source else {})}
        count = int(base["n"])
        if count > len(value) or fingerprints[count] != bytes(base["h"]):
            count, task = 0, None  # earlier messages rewritten or removed
        try:
            new = from_langchain(
                value[count:], check=True, ids=message_ids(value, count, len(value), fingerprints)
            )
        except ValidationError:
            return blob
        if task is not None and await self._append(task, thread, ns, count, new, value[count:]):
            return record if task == implicit else {**record, "t": task}
        branch = keys.branch_task_id(ident, ns, checkpoint_id)
        try:
            if task is None:  # from the list itself: what `source` holds is copied
                kept = from_langchain(
                    value[:count], check=True, ids=message_ids(value, 0, count, fingerprints)
                )
                await self._mark_copies([*kept, *new], source)
            else:  # time travel: the prefix of `task` is copied
                kept = await self._tasks.messages(task, 0, count) if count else []
                mark_copies(kept, task)
            await self._storage.create_messages_task(branch, thread, ns, [*kept, *new])
        except (ValidationError, NotFound):
            return blob
        return {**record, "t": branch}

    async def _mark_copies(self, kept: list[AnyMessage], source: str | None) -> None:
        """Messages of a task started from a list (rewritten, or after a blob) that
        `source`, the task the list came from, already holds are copies (`origin`)."""
        if source is None:
            return
        try:
            stored = await self._tasks.messages(source)
        except NotFound:
            return
        origins = {
            m.id: m.origin or Origin(task_id=source, index=index)
            for index, m in enumerate(stored)
            if isinstance(m, MessageBase)
        }
        for message in kept:
            if isinstance(message, MessageBase) and message.origin is None:
                message.origin = origins.get(message.id)

    async def _append(
        self,
        task: str,
        thread: str,
        ns: str,
        count: int,
        new: list[Any],
        given: Sequence[BaseMessage],
    ) -> bool:
        """Append `new` (the typed form of `given`) after the task's first `count` messages.
        True also when the task already holds exactly these messages there (a retried or
        late put: nothing is written); False when it holds others (the caller starts a
        branch). A task of that id that is not this thread's: Conflict."""
        try:
            record = await self._tasks.get(task)
        except NotFound:
            if count:
                return False
            await self._storage.create_messages_task(task, thread, ns, new)
            return True
        check_ours(task, record.metadata, thread)
        if record.seq == count and new:
            try:
                await self._tasks.add_messages(task, new)
            except ValidationError:
                return False
            return bool((await self._tasks.header(task)).seq == count + len(new))
        if record.seq < count + len(new):
            return False
        if not new:
            return True
        stored = to_langchain(await self._tasks.messages(task, count, len(new)))
        return [keys.fingerprint(message_to_dict(m)) for m in stored] == [
            self._fingerprint(m) for m in given
        ]

    def _fingerprint(self, message: BaseMessage) -> bytes:
        cached = self._fingerprints.get(id(message))
        if cached is not None and cached[0] is message:
            return cached[1]
        value = keys.fingerprint(message_to_dict(message))
        self._fingerprints[id(message)] = (message, value)
        if len(self._fingerprints) > FINGERPRINTS:
            self._fingerprints.popitem(last=False)
        return value

    # ------------------------------------------------------------------ writes
    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store the pending writes of a node run for a checkpoint (LangGraph's `aput_writes`).

        Args:
            config: LangGraph's `RunnableConfig`; `configurable` holds `thread_id` and, optionally,
                `checkpoint_ns` and `checkpoint_id`.
            writes: `(channel, value)` pairs.
            task_id: The id of the LangGraph task (node run) that wrote them.
            task_path: The task's path in the graph.

        Raises:
            ValidationError: The config names no checkpoint, or a bad id.
        """
        thread, ns, checkpoint_id = self._where(config)
        if checkpoint_id is None:
            raise ValidationError("put_writes: config has no checkpoint_id")
        check_name(task_id, "task_id")
        key = keys.writes_key(self.tenant, self._storage.ident(thread), ns, checkpoint_id, task_id)
        await pending.put(self._storage, key, writes, task_id, task_path)

    # ------------------------------------------------------------------ reads
    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """A thread's checkpoint with its writes and parent: the one `config` names, else the
        latest of its namespace (LangGraph's `aget_tuple`).

        Args:
            config: LangGraph's `RunnableConfig`; `configurable` holds `thread_id` and, optionally,
                `checkpoint_ns` and `checkpoint_id`.

        Returns:
            The `CheckpointTuple`, or None when there is none.

        Raises:
            ValidationError: A bad thread id, namespace or checkpoint id.
        """
        thread, ns, checkpoint_id = self._where(config)
        prefix = keys.scope_prefix(self.tenant, self._storage.ident(thread), ns)
        if checkpoint_id is not None:
            row = await self._storage.checkpoints.find_one(
                {**self._storage.scope(), "_id": prefix + checkpoint_id}
            )
            rows = [row] if row else []
        else:
            cursor = self._storage.checkpoints.find(
                {**self._storage.scope(), "_id": keys.prefix_range(prefix)}
            )
            rows = await cursor.sort("_id", -1).limit(1).to_list(length=1)
        tuples = await self._tuples(rows)
        return tuples[0] if tuples else None

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Checkpoints, newest first (LangGraph's `alist`).

        Args:
            config: Limit to a thread (and namespace, and checkpoint) as in `aget_tuple`;
                None: every thread of the view.
            filter: Only checkpoints whose metadata has these values.
            before: Only checkpoints older than the one this config names.
            limit: At most this many.

        Yields:
            `CheckpointTuple`s.

        Raises:
            ValidationError: A bad config or filter.
        """
        pushed, conditions = keys.split_filter(filter)
        if self._sealed:  # sealed metadata values are matched after opening (`conditions`)
            pushed = {k: v for k, v in pushed.items() if k.removeprefix("md.") in METADATA_CLEAR}
        query = {**self._storage.scope(), **pushed}
        checkpoint_id = None
        if config is not None:
            thread, ns, checkpoint_id = self._where(config)
            ident = self._storage.ident(thread)
            if (config.get("configurable") or {}).get("checkpoint_ns") is not None:
                query["_id"] = keys.prefix_range(keys.scope_prefix(self.tenant, ident, ns))
            else:
                query["_id"] = keys.prefix_range(keys.thread_prefix(self.tenant, ident))
        before_id = get_checkpoint_id(before) if before else None
        if limit is not None and limit <= 0:
            return
        rows = await self._storage.checkpoints.find(query).sort("_id", -1).to_list(length=None)
        picked = []
        for row in rows:
            where = keys.row_where(row)
            if checkpoint_id is not None and where[2] != checkpoint_id:
                continue
            if before_id is not None and where[2] >= before_id:
                continue
            if conditions and not keys.matches(self._metadata(row), conditions):
                continue
            picked.append(row)
            if limit is not None and len(picked) >= limit:
                break
        picked.sort(key=lambda row: keys.row_where(row)[2], reverse=True)
        picked.sort(key=lambda row: keys.row_where(row)[1])
        for start in range(0, len(picked), CHUNK):
            for item in await self._tuples(picked[start : start + CHUNK]):
                yield item

    def _metadata(self, row: dict[str, Any]) -> dict[str, Any]:
        if row.get("mdb"):
            return self.serde.loads_typed(tuple(row["mdb"]))  # type: ignore[no-any-return]
        fields: dict[str, Any] = unescape_keys(row.get("md") or {})
        return fields

    async def _tuples(self, rows: list[dict[str, Any]]) -> list[CheckpointTuple]:
        """Tuples for checkpoint rows, reading blobs, messages and writes in batches."""
        if not rows:
            return []
        wanted: set[str] = set()
        longest: dict[str, int] = {}
        for row in rows:
            thread, ns, _ = keys.row_where(row)
            ident = self._storage.ident(thread)
            for channel, writer in (row.get("b") or {}).items():
                wanted.add(keys.blob_key(self.tenant, ident, ns, writer, channel))
            ms = row.get("ms")
            if ms and not ms.get("b"):
                task = ms.get("t", keys.messages_task_id(ident, ns))
                longest[task] = max(longest.get(task, 0), int(ms["n"]))
        found: list[dict[str, Any]] = []
        names = sorted(wanted)
        for start in range(0, len(names), CHUNK):
            query = {"tenant": self.tenant, "_id": {"$in": names[start : start + CHUNK]}}
            found.extend(await self._storage.blobs.find(query).to_list(length=None))
        referenced = await pending.read_refs(
            self._storage, [blob["r"] for blob in found if blob.get("t") == pending.REF_MAP]
        )
        blobs = {
            blob["_id"]: pending.resolve_blob(self._storage, blob, referenced) for blob in found
        }
        histories = {
            task: to_langchain(await self._tasks.messages(task, 0, count)) if count else []
            for task, count in longest.items()
        }
        writes = await pending.load(self._storage, [row["_id"] for row in rows])
        out = []
        for row in rows:
            thread, ns, checkpoint_id = keys.row_where(row)
            ident = self._storage.ident(thread)
            stored = keys.unpack_checkpoint(self.serde.loads_typed(tuple(row["c"])))
            values: dict[str, Any] = {}
            for channel, (value_kind, data) in (row.get("iv") or {}).items():
                values[channel] = self.serde.loads_typed((value_kind, bytes(data)))
            for channel, writer in (row.get("b") or {}).items():
                key = keys.blob_key(self.tenant, ident, ns, writer, channel)
                if key in blobs:
                    values[channel] = blobs[key]
            ms = row.get("ms")
            if ms and not ms.get("b"):
                values[self.messages_channel] = list(
                    histories[ms.get("t", keys.messages_task_id(ident, ns))][: int(ms["n"])]
                )
            checkpoint = {**stored, "id": checkpoint_id, "channel_values": values}
            configurable = {
                "thread_id": thread,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint_id,
            }
            parent = keys.unpack_id(row.get("p"))
            out.append(
                CheckpointTuple(
                    config={"configurable": configurable},
                    checkpoint=checkpoint,  # type: ignore[arg-type]
                    metadata=self._metadata(row),  # type: ignore[arg-type]
                    parent_config={"configurable": {**configurable, "checkpoint_id": parent}}
                    if parent
                    else None,
                    pending_writes=writes.get(row["_id"], []),
                )
            )
        return out

    # ------------------------------------------------------------------ deleting, copying, pruning
    async def adelete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint, write, blob and messages task of the thread (all namespaces).

        Args:
            thread_id: The thread.

        Raises:
            ValidationError: A bad thread id.
        """
        await admin.delete_thread(self._storage, self._thread(thread_id))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints written by these runs and their writes (blobs and messages stay:
        other checkpoints of the thread share them).

        Args:
            run_ids: The runs' ids (`metadata["run_id"]`).
        """
        await admin.delete_for_runs(
            self._storage, [check_name(run_id, "run id") for run_id in run_ids]
        )

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, write and blob of one thread under another thread id, with copies
        of its messages tasks (so deleting either thread leaves the other whole).

        Args:
            source_thread_id: The thread to copy.
            target_thread_id: The new thread's id.

        Raises:
            ValidationError: A bad thread id.
        """
        await admin.copy_thread(
            self._storage,
            self._thread(source_thread_id),
            self._thread(target_thread_id),
        )

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Shrink threads: `keep_latest` keeps each namespace's latest checkpoint, its writes, and
        the blobs and messages it holds; `delete` deletes the whole thread.

        Args:
            thread_ids: The threads.
            strategy: `"keep_latest"` or `"delete"`.

        Raises:
            ValidationError: An unknown strategy or a bad thread id.
        """
        if strategy not in ("keep_latest", "delete"):
            raise ValidationError(f"strategy: expected 'keep_latest' or 'delete', got {strategy!r}")
        for thread_id in thread_ids:
            await admin.prune(self._storage, self._thread(thread_id), strategy)
