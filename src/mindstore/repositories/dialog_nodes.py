"""The dialog trees' nodes: one document per dialog with a place in a tree.

A node is keyed like its task (`task_key`) and names its parent, root, ancestors and depth,
so a subtree is one indexed query on `ancestors`. A task without a node (made by
`tasks.create`) is an implicit root; it gets a node of its own before its first child. A
node is written once (a retried insert of the same node is a no-op, another one is a
`Conflict`). `DialogRepository` holds a `DialogNodes` and documents the tree queries.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from pymongo.errors import DuplicateKeyError

from mindstore.collection_names import DIALOG_NODES, TASK_PAGES, TASKS
from mindstore.errors import Conflict, NotFound, ValidationError
from mindstore.ids import task_id_of, task_key
from mindstore.model import dialog as tree
from mindstore.model.dialog import FORK_MARKER, DialogNode
from mindstore.model.plans import check_id
from mindstore.repositories.tasks import TaskRepository
from mindstore.stored_documents import node_document

MAX_FORKED_IDS = 1000
"""The most dialog ids one `forked` call takes (two reads bounded by them)."""


class DialogNodes:
    """The tree nodes of one tenant's dialogs (one owner's, on an owner-scoped view)."""

    def __init__(self, tasks: TaskRepository) -> None:
        self.tasks = tasks
        self.tenant = tasks.tenant
        self.owner = tasks.owner
        database = tasks.database
        # the collections the dialog parts read and write, read from here at each call (a
        # test swaps one for a proxy here and every part sees it)
        self.collection = database[DIALOG_NODES]
        self.task_documents = database[TASKS]
        self.task_pages = database[TASK_PAGES]

    def scoped(self, **fields: Any) -> dict[str, Any]:
        """A node (or task) filter in this view's scope: the tenant, and the owner if set."""
        query: dict[str, Any] = {"tenant": self.tenant, **fields}
        if self.owner is not None:
            query["owner"] = self.owner
        return query

    def key_filter(self, dialog_id: str) -> dict[str, Any]:
        """The filter of one dialog's node (the id checked)."""
        return self.scoped(_id=task_key(self.tenant, check_id(dialog_id, "dialog id")))

    async def insert(self, node: DialogNode) -> None:
        """Write the node; the same node written by an earlier attempt is not an error."""
        document = node_document(node, self.tenant)
        try:
            await self.collection.insert_one(document)
        except DuplicateKeyError as exc:
            stored = await self.collection.find_one({"_id": document["_id"], "tenant": self.tenant})
            if stored is not None and same_node(stored, document):
                return  # this very node, written by an earlier attempt whose reply was lost
            raise Conflict(f"dialog {node.dialog_id!r} already has a tree node") from exc

    async def node(self, dialog_id: str) -> DialogNode:
        """The dialog's node, or an implicit root's (`DialogRepository.node` documents it)."""
        document = await self.collection.find_one(self.key_filter(dialog_id))
        if document is not None:
            return DialogNode.from_document(document)
        record = await self.tasks.get(dialog_id)  # NotFound for a missing task
        if (record.metadata or {}).get(FORK_MARKER):
            raise NotFound(f"dialog {dialog_id!r} is an unfinished fork; run dialogs.repair()")
        return DialogNode(dialog_id=record.id, owner=record.owner, root_id=record.id)

    async def ensure(self, dialog_id: str) -> DialogNode:
        """The dialog's node, written first for an implicit root (before it gets children)."""
        node = await self.node(dialog_id)
        if node.created_at is None:  # an implicit root: make it real before it gets children
            with contextlib.suppress(Conflict):  # a concurrent fork wrote it first
                await self.insert(node)
            node = await self.node(dialog_id)
        return node

    async def subtree(self, dialog_id: str) -> list[DialogNode]:
        """The node and all its descendants: one indexed query on `ancestors`."""
        root = await self.node(dialog_id)
        cursor = self.collection.find(self.scoped(ancestors=root.dialog_id))
        return [root, *[DialogNode.from_document(d) async for d in cursor]]

    async def message_counts(self, ids: Sequence[str]) -> dict[str, int]:
        """Each dialog's message count, from one read of the tasks' `seq`."""
        keys = [task_key(self.tenant, i) for i in ids]
        cursor = self.task_documents.find(self.scoped(_id={"$in": keys}), {"seq": 1})
        return {
            task_id_of(document["_id"]): int(document.get("seq", 0)) async for document in cursor
        }

    async def children(self, dialog_id: str) -> list[DialogNode]:
        """The dialog's direct forks, breadth-first ordered."""
        parent = await self.node(dialog_id)
        cursor = self.collection.find(self.scoped(parent_id=parent.dialog_id))
        nodes = [DialogNode.from_document(d) async for d in cursor]
        return tree.bfs_order(parent.dialog_id, [parent, *nodes])[1:]

    async def forked(self, dialog_ids: Sequence[str]) -> set[str]:
        """Which of these dialogs are a fork's child or parent: two reads bounded by the ids."""
        if len(dialog_ids) > MAX_FORKED_IDS:
            raise ValidationError("dialog_ids: at most 1000")
        ids = [check_id(i, "dialog id") for i in dialog_ids]
        if not ids:
            return set()
        keys = [task_key(self.tenant, i) for i in ids]
        children = self.collection.find(self.scoped(_id={"$in": keys}), {"parent_id": 1})
        found = {task_id_of(d["_id"]) async for d in children if d.get("parent_id")}
        parents = await self.collection.distinct("parent_id", self.scoped(parent_id={"$in": ids}))
        return found | {p for p in parents if isinstance(p, str)}


def same_node(stored: dict[str, Any], document: dict[str, Any]) -> bool:
    """Is the stored node the one `document` describes (its time of writing aside)?"""
    return {k: v for k, v in stored.items() if k != "created_at"} == {
        k: v for k, v in document.items() if k != "created_at"
    }
