"""Deleting dialog trees and repairing the writes over several documents cut short.

A dialog's documents are its task, its node and, for a long one, its sealed pages; no write
spans them atomically, so each multi-document write runs in an order that a crash can only
leave repairable: a subtree is deleted deepest first, each task before its node (no node
ever points at a missing parent), and `repair` finishes or removes half-made forks and
imports, drops nodes whose task is gone and removes sealed pages no task counts
(`bulk_pages.remove_orphans`). `DialogRepository` holds a `DialogRepair` and documents both.
"""

from __future__ import annotations

from datetime import timedelta

from mindstore.clock import utcnow
from mindstore.draws import current_tape
from mindstore.errors import Conflict, NotFound, ValidationError
from mindstore.ids import task_id_of, task_key
from mindstore.model.dialog import FORK_MARKER, DialogNode
from mindstore.repositories.bulk_pages import ORPHAN_GRACE, remove_orphans
from mindstore.repositories.dialog_nodes import DialogNodes


class DialogRepair:
    """Subtree deletes and the repair of one tenant's dialogs (one owner's, on an
    owner-scoped view, which leaves the pages to the tenant's repair)."""

    def __init__(self, nodes: DialogNodes) -> None:
        self.nodes = nodes

    async def delete(self, dialog_id: str, cascade: bool = False) -> list[str]:
        """Delete a dialog, and with `cascade` its whole subtree, deepest first."""
        key = self.nodes.key_filter(dialog_id)["_id"]
        tape, noted = current_tape(), ("dialogs.delete", key)
        earlier = tape.recall(noted) if tape is not None else None
        try:
            nodes = await self.nodes.subtree(dialog_id)
        except NotFound:
            if tape is not None and isinstance(earlier, list):  # an earlier attempt of this
                tape.note(noted, earlier)  # call deleted it all, its reply lost
                return earlier
            raise
        if len(nodes) > 1 and not cascade:
            raise Conflict(
                f"dialog {dialog_id!r} has {len(nodes) - 1} descendant(s); pass cascade=True"
            )
        doomed = [n.dialog_id for n in sorted(nodes, key=lambda n: -n.depth)]
        if isinstance(earlier, list):  # the earlier attempt's list: what this call deletes
            doomed = [*(i for i in earlier if i not in doomed), *doomed]
            earlier = [i for i in earlier if i in doomed] + [i for i in doomed if i not in earlier]
        if tape is not None:
            tape.note(noted, earlier if isinstance(earlier, list) else doomed)
        for victim in doomed:  # deepest first; each task before its node
            try:
                await self.nodes.tasks.delete(victim)
            except NotFound:
                tenant = self.nodes.tenant
                await self.nodes.collection.delete_one(
                    {"_id": task_key(tenant, victim), "tenant": tenant}
                )
        return earlier if isinstance(earlier, list) else doomed

    async def repair(self, *, grace: timedelta = ORPHAN_GRACE) -> dict[str, list[str]]:
        """Finish or remove half-made forks, drop nodes whose task is gone, and remove the
        sealed pages no task counts."""
        if not isinstance(grace, timedelta) or grace < timedelta(0):
            raise ValidationError(f"grace: expected a timedelta of zero or more, got {grace!r}")
        tenant, scoped = self.nodes.tenant, self.nodes.scoped
        nodes, tasks = self.nodes.collection, self.nodes.task_documents
        report: dict[str, list[str]] = {"finished": [], "removed_tasks": [], "removed_nodes": []}
        forks = tasks.find(
            scoped(**{f"metadata.{FORK_MARKER}": {"$exists": True}}),
            {"_id": 1, f"metadata.{FORK_MARKER}": 1},
        )
        candidates = {task_id_of(d["_id"]): d["metadata"][FORK_MARKER] async for d in forks}
        present = {
            task_id_of(d["_id"])
            async for d in nodes.find(
                scoped(_id={"$in": [task_key(tenant, i) for i in candidates]}), {"_id": 1}
            )
        }
        for task_id, plan in candidates.items():
            if task_id in present:
                continue
            parent_id = plan.get("parent_id")
            parent_exists = isinstance(parent_id, str) and await nodes.count_documents(
                {"tenant": tenant, "_id": task_key(tenant, parent_id)}, limit=1
            )
            if parent_exists:
                await self.nodes.insert(DialogNode(**plan))
                report["finished"].append(task_id)
            else:
                await self.nodes.tasks.delete(task_id)
                report["removed_tasks"].append(task_id)
        node_ids = [task_id_of(d["_id"]) async for d in nodes.find(scoped(), {"_id": 1})]
        task_ids = {task_id_of(d["_id"]) async for d in tasks.find(
            {"tenant": tenant, "_id": {"$in": [task_key(tenant, i) for i in node_ids]}},
            {"_id": 1})}  # fmt: skip
        for node_id in node_ids:
            if node_id not in task_ids and not await nodes.count_documents(
                {"tenant": tenant, "parent_id": node_id}, limit=1
            ):
                await nodes.delete_one({"_id": task_key(tenant, node_id), "tenant": tenant})
                report["removed_nodes"].append(node_id)
        if self.nodes.owner is None:
            pages = await remove_orphans(
                self.nodes.task_pages, tasks, tenant, before=utcnow() - grace
            )
            if pages:
                report["removed_pages"] = pages
        return report
