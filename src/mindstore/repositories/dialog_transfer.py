"""The dialog document's dict form: a dialog exported as one dict and imported back.

`export_dialog` gives the messages (stored form), the tree node and the top prompt's path;
`import_dialog` checks a whole dict before its first write, then inserts the task and its
node, the parent's node first read (its plan rides in the task's metadata, as a fork's,
so a crash between the two inserts is what `dialogs.repair()` finishes).
`DialogRepository` holds a `DialogTransfer` and documents both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mindstore.errors import ValidationError
from mindstore.model import dialog as tree
from mindstore.model.base import new_id
from mindstore.model.dialog import FORK_MARKER, DialogNode
from mindstore.model.messages import AnyMessage, parse_message
from mindstore.model.plans import check_id, check_message_id
from mindstore.repositories.dialog_nodes import DialogNodes
from mindstore.repositories.dialog_prompts import PROMPT_KEY
from mindstore.repositories.records import TaskRecord
from mindstore.validation import check_optional_int, check_owner


class DialogTransfer:
    """Export and import of one tenant's dialogs in the dialog document's dict form."""

    def __init__(self, nodes: DialogNodes) -> None:
        self.nodes = nodes

    async def export_dialog(self, dialog_id: str) -> dict[str, Any]:
        """The dialog as one dict, the form `import_dialog` reads back."""
        node = await self.nodes.node(dialog_id)
        record = await self.nodes.tasks.get(dialog_id)
        messages = await self.nodes.tasks.messages(dialog_id)
        children = [c.dialog_id for c in await self.nodes.children(dialog_id)]
        tail_meta = (getattr(messages[-1], "metadata", None) or {}) if messages else {}
        return {
            "dialog_id": dialog_id,
            "owner": record.owner,
            "title": record.title,
            "messages": [m.to_dict() for m in messages],
            "tree_node": tree.node_to_seed_dict(node, children),
            "top_prompt_path": tail_meta.get(PROMPT_KEY),
        }

    async def import_dialog(self, data: Mapping[str, Any]) -> TaskRecord:
        """Store a dialog from its dict; its parent (if any) must exist already."""
        if not isinstance(data, Mapping) or not isinstance(data.get("messages", []), list):
            raise ValidationError("a dialog dict needs a 'messages' list")
        tree_node = data.get("tree_node") or {}
        if not isinstance(tree_node, Mapping):
            raise ValidationError("tree_node must be a dict")
        node_data = dict(tree_node)
        dialog_id = check_id(
            data.get("dialog_id") or node_data.get("dialog_id") or new_id(), "dialog id"
        )
        owner = check_owner(data.get("owner", node_data.get("owner")))
        parent_id = node_data.get("parent_id")
        if parent_id is not None:
            check_id(parent_id, "tree_node.parent_id")
        split_point = check_optional_int(node_data.get("split_point"), "tree_node.split_point")
        last_n = check_optional_int(node_data.get("last_n"), "tree_node.last_n") or 0
        first_k = check_optional_int(node_data.get("first_k"), "tree_node.first_k") or 0
        at_message_id = node_data.get("at_message_id")
        if at_message_id is not None:
            check_message_id(at_message_id, "tree_node.at_message_id")
        messages = [seed_message(m) for m in data.get("messages", [])]
        # Everything is checked before the first write: the parent's node, then one insert
        # for the task, then its node (a crash in between is what `repair()` finishes).
        parent = await self.nodes.node(parent_id) if parent_id else None
        for message in messages:
            if hasattr(message, "task_id"):
                message.task_id = dialog_id
        if parent is None:
            node = DialogNode(dialog_id=dialog_id, owner=owner, root_id=dialog_id)
            metadata = None
        else:  # like a fork: the plan rides in the task, so `repair()` can finish the node
            node = tree.child_node(parent, dialog_id, owner, split_point or len(messages),
                                   last_n, first_k, at_message_id)  # fmt: skip
            metadata = {FORK_MARKER: node.model_dump(exclude={"created_at"})}
        record = await self.nodes.tasks.create(
            owner=owner,
            title=data.get("title"),
            task_id=dialog_id,
            messages=messages,
            metadata=metadata,
            replay=True,
        )
        await self.nodes.insert(node)
        return record


def seed_message(data: Any) -> AnyMessage:
    """A stored-form message, or the dialog document's plainer form (content as a string)."""
    if not isinstance(data, dict):
        raise ValidationError("each message must be a dict")
    if isinstance(data.get("content"), str):
        data = {**data, "content": [{"type": "text", "text": data["content"]}]}
    return parse_message(data)
