"""Dialog trees (the dialog document), the pure part: fork selection, tree shapes, overview text,
and the dialog document's `to_dict` form. No I/O; `repositories/dialogs.py` does the reads and writes.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any, Iterable, Mapping, Sequence

from pydantic import BaseModel, Field

from mindstore.errors import ValidationError
from mindstore.ids import task_id_of
from mindstore.model.messages import AnyMessage, Origin

FORK_MARKER = "mindstore_fork"
"""Task metadata key written with a fork's task, before its node: lets `repair` finish or
remove a fork whose node never got written."""


class DialogNode(BaseModel):
    """A dialog's place in its tree (a `DialogNodeDoc` without storage concerns)."""

    dialog_id: str
    owner: str | None = None
    parent_id: str | None = None
    root_id: str
    ancestors: list[str] = Field(default_factory=list)
    depth: int = 0
    split_point: int | None = None
    last_n: int | None = None
    first_k: int | None = None
    at_message_id: str | None = None
    created_at: datetime | None = None

    @property
    def is_root(self) -> bool:
        return self.parent_id is None

    @classmethod
    def from_document(cls, doc: dict[str, Any]) -> "DialogNode":
        return cls(dialog_id=task_id_of(doc["_id"]), **{k: v for k, v in doc.items() if k not in {"_id", "tenant"}})


def kept_indexes(length: int, last_n: int = 0, first_k: int = 1) -> list[int]:
    """The dialog document's fork selection: every index when `last_n` is 0 or `last_n + first_k`
    covers the history, else the first `first_k` and the last `last_n`."""
    if last_n < 0 or first_k < 0:
        raise ValidationError(f"last_n and first_k must be >= 0 (got last_n={last_n}, first_k={first_k})")
    if last_n == 0 or last_n + first_k >= length:
        return list(range(length))
    return list(range(first_k)) + list(range(length - last_n, length))


def fork_copies(
    source_id: str,
    child_id: str,
    history: Sequence[AnyMessage] | Mapping[int, AnyMessage],
    indexes: Iterable[int],
) -> list[AnyMessage]:
    """Deep copies of the kept messages for the child, each recording where it came from.

    A copy of a copy keeps the first origin, so analytics can count a shared prefix once
    however many generations of forks repeat it.
    """
    copies: list[AnyMessage] = []
    for index in indexes:
        message = history[index].model_copy(deep=True)
        if hasattr(message, "origin"):
            if message.origin is None:
                message.origin = Origin(task_id=source_id, index=index)
            message.task_id = child_id
        copies.append(message)
    return copies


def child_node(parent: DialogNode, child_id: str, owner: str | None, kept: int,
               last_n: int, first_k: int, at_message_id: str | None) -> DialogNode:  # fmt: skip
    return DialogNode(
        dialog_id=child_id,
        owner=owner if owner is not None else parent.owner,
        parent_id=parent.dialog_id,
        root_id=parent.root_id,
        ancestors=[*parent.ancestors, parent.dialog_id],
        depth=parent.depth + 1,
        split_point=kept,
        last_n=last_n,
        first_k=first_k,
        at_message_id=at_message_id,
    )


def _children_map(nodes: Iterable[DialogNode]) -> dict[str | None, list[DialogNode]]:
    children: dict[str | None, list[DialogNode]] = defaultdict(list)
    for node in nodes:
        children[node.parent_id].append(node)
    for siblings in children.values():
        siblings.sort(key=lambda n: (n.created_at or datetime.min, n.dialog_id))
    return children


def bfs_order(root_id: str, nodes: Iterable[DialogNode]) -> list[DialogNode]:
    """The subtree of `root_id` in breadth-first order, siblings oldest first (the dialog document)."""
    nodes = list(nodes)
    by_id = {n.dialog_id: n for n in nodes}
    if root_id not in by_id:
        return []
    children = _children_map(nodes)
    order, frontier = [], [by_id[root_id]]
    while frontier:
        order.extend(frontier)
        frontier = [child for node in frontier for child in children.get(node.dialog_id, [])]
    return order


def overview_line(node: DialogNode, relative_depth: int, message_count: int) -> str:
    """One line of `tree_overview()`, in the dialog document's format."""
    line = f"[{node.dialog_id[:8]}] owner={node.owner} msgs={message_count} split@{node.split_point}"
    if node.last_n:
        line += f" (last_n={node.last_n}, first_k={node.first_k})"
    if relative_depth == 0:
        return line
    return "  " * relative_depth + "└─ " + line


def tree_overview(root_id: str, nodes: Iterable[DialogNode], counts: dict[str, int]) -> str:
    """The dialog document's indented tree, depth first so each child sits under its parent."""
    nodes = list(nodes)
    children = _children_map(nodes)
    by_id = {n.dialog_id: n for n in nodes}
    if root_id not in by_id:
        return ""
    lines: list[str] = []
    stack = [(by_id[root_id], 0)]
    while stack:
        node, depth = stack.pop()
        lines.append(overview_line(node, depth, counts.get(node.dialog_id, 0)))
        stack.extend((child, depth + 1) for child in reversed(children.get(node.dialog_id, [])))
    return "\n".join(lines)


def tree_json(root_id: str, nodes: Iterable[DialogNode], counts: dict[str, int]) -> dict[str, Any]:
    """The same tree as nested dicts (for `--format json` and UIs)."""
    nodes = list(nodes)
    children = _children_map(nodes)
    by_id = {n.dialog_id: n for n in nodes}

    def build(node: DialogNode) -> dict[str, Any]:
        return {
            "dialog_id": node.dialog_id,
            "owner": node.owner,
            "messages": counts.get(node.dialog_id, 0),
            "depth": node.depth,
            "split_point": node.split_point,
            "last_n": node.last_n,
            "first_k": node.first_k,
            "at_message_id": node.at_message_id,
            "children": [build(child) for child in children.get(node.dialog_id, [])],
        }

    return build(by_id[root_id]) if root_id in by_id else {}


def message_overview(messages: Sequence[AnyMessage], width: int = 80) -> str:
    """`Dialog.overview()`: a line per message, role, sender and the start of its text."""
    lines = []
    for index, message in enumerate(messages):
        role = getattr(message, "role", None) or "unknown"
        name = getattr(message, "name", None)
        text = " ".join(message.text().split()) if hasattr(message, "text") else ""
        if len(text) > width:
            text = text[: width - 1] + "…"
        sender = f"{role}({name})" if name else role
        lines.append(f"{index:>4} {sender}: {text}")
    return "\n".join(lines)


def node_to_seed_dict(node: DialogNode, children_ids: Sequence[str]) -> dict[str, Any]:
    """The dialog document's `DialogTreeNode.to_dict()` plus the materialized tree fields."""
    return {
        "dialog_id": node.dialog_id,
        "owner": node.owner,
        "parent_id": node.parent_id,
        "split_point": node.split_point,
        "last_n": node.last_n,
        "first_k": node.first_k,
        "children_ids": list(children_ids),
        "root_id": node.root_id,
        "depth": node.depth,
        "at_message_id": node.at_message_id,
    }
