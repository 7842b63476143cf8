"""Dialog trees on the store (the dialog document): dialogs are tasks, nodes are separate documents.

Forks are frequent (agents fork at every interrupt iteration), so a fork is two inserts:
the child task with its copied messages (one `tasks.create`, header recomputed from what
it kept; a long copy writes its sealed pages first, which stay invisible until that
insert), then its node. The node is written last: until it exists the child is invisible
to every tree query, and `repair()` either finishes it (its task carries the fork's plan in
`metadata.mindstore_fork`) or removes it. Deletion goes deepest first, task before node,
so no node ever points at a missing parent.

`repair()` is the tenant's repair of every multi-document write cut short: half-made forks
and imports, nodes whose task is gone, and sealed pages that no task counts (a long
create that stopped before its insert, a delete that stopped before its pages;
`repositories.bulk_pages`).

`DialogRepository` is the documented facade; it composes the parts that do the work: the
nodes and the tree queries (`dialog_nodes.DialogNodes`), subtree deletes and the repair
(`dialog_repair.DialogRepair`), the dict form (`dialog_transfer.DialogTransfer`) and the
prompts' pure checks and rendering (`dialog_prompts`). Here are the dialog verbs
(create, put_*, fork) and each method's documentation.
"""

from __future__ import annotations

import asyncio
import base64
import mimetypes
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from mindstore import operations
from mindstore.errors import NotFound, ValidationError, WrongType
from mindstore.model import dialog as tree
from mindstore.model.base import new_id
from mindstore.model.dialog import FORK_MARKER, DialogNode
from mindstore.model.header import UsageTotals
from mindstore.model.messages import AnyMessage, AssistantMessage, SystemMessage, UserMessage
from mindstore.model.parts import ImagePart, TextPart
from mindstore.model.plans import check_message_id
from mindstore.operations import Resilience
from mindstore.repositories.bulk_pages import ORPHAN_GRACE
from mindstore.repositories.dialog_nodes import DialogNodes
from mindstore.repositories.dialog_prompts import (
    PROMPT_KEY,
    PromptRegistry,
    check_prompt_call,
    render_prompt,
)
from mindstore.repositories.dialog_repair import DialogRepair
from mindstore.repositories.dialog_transfer import DialogTransfer
from mindstore.repositories.records import TaskRecord
from mindstore.repositories.tasks import TaskRepository
from mindstore.validation import (
    check_int,
    check_optional_json,
    check_optional_text,
    check_owner,
)

__all__ = ["PROMPT_KEY", "ROLE_CLASSES", "UNNAMED_FORK", "DialogRepository", "PromptRegistry"]

UNNAMED_FORK = (
    "a fork draws its child's id: retried from this process it is exactly-once (the store "
    "keeps the id it drew), retried from another one it may fork twice (dialogs.repair() "
    "finishes the half-made one)"
)
"""What `Unavailable` says of a fork."""

ROLE_CLASSES = {"user": UserMessage, "system": SystemMessage, "assistant": AssistantMessage}


@operations.operations("dialogs")
class DialogRepository:
    """The dialog document's Dialog verbs and tree queries for one tenant."""

    def __init__(self, tasks: TaskRepository) -> None:
        self.tenant = tasks.tenant
        self.owner = tasks.owner
        self.tasks = tasks
        self.nodes = DialogNodes(tasks)  # the tree nodes and the queries over them
        self.repairs = DialogRepair(self.nodes)  # subtree deletes, repair of cut writes
        self.transfer = DialogTransfer(self.nodes)  # the dialog document dict form

    @property
    def resilience(self) -> Resilience:
        """The tasks' retry policy and ledger (every method here is an operation)."""
        return self.tasks.resilience

    # ------------------------------------------------------------------ nodes
    async def node(self, dialog_id: str) -> DialogNode:
        """The dialog's tree node: parent, root, ancestors, depth and how it was forked.

        A task without a node (made by `tasks.create`) is an implicit root.

        Args:
            dialog_id: The dialog (a task id).

        Returns:
            The `DialogNode`.

        Raises:
            NotFound: No such dialog, or an unfinished fork (run `dialogs.repair()`).
            ValidationError: `dialog_id` is not a task id.
        """
        return await self.nodes.node(dialog_id)

    # ------------------------------------------------------------------ dialog verbs
    async def create(
        self,
        owner: str,
        prompt: str | None = None,
        *,
        title: str | None = None,
        dialog_id: str | None = None,
    ) -> TaskRecord:
        """Create a root dialog owned by an agent, seeded with its system prompt if given.

        A dialog is a task with a tree node (docs/glossary.md). Use `dialogs.create` and
        `put_text` for agent dialogs that fork and carry prompts; use `tasks.create` and the
        `add_*` verbs for a conversation with typed turns, tool calls and sub-tasks. Both write
        the same kind of task, so every read works on either.

        Args:
            owner: The agent's name (the dialog's owner; required).
            prompt: The system prompt, stored as the first message (named after the owner).
            title: A label for people.
            dialog_id: Choose the id (default: a new random one).

        Returns:
            The new task's record.

        Raises:
            ValidationError: No owner, or a bad prompt, title or id.
            Conflict: `dialog_id` is already in use.

        Example:
            ```python
            dialog = await acme.dialogs.create("planner", "You plan trips.")
            await acme.dialogs.put_text(dialog.id, "Lisbon in May")
            ```
        """
        if owner is None:
            raise ValidationError("owner: a dialog needs an owner (the agent's name)")
        check_owner(owner)
        check_optional_text(prompt, "prompt")
        messages = [SystemMessage(content=[TextPart(text=prompt)], name=owner)] if prompt else []
        record = await self.tasks.create(
            owner=owner, title=title, task_id=dialog_id, messages=messages
        )
        await self.nodes.insert(DialogNode(dialog_id=record.id, owner=owner, root_id=record.id))
        return record

    async def _put(self, dialog_id: str, role: str, content: list[Any], name: str | None,
                   metadata: dict[str, Any] | None) -> AnyMessage:  # fmt: skip
        # every argument checked here, naming it: a dict role is unhashable, a non-string
        # name or metadata key would surface as pydantic's own error from the message model
        cls = ROLE_CLASSES.get(role) if isinstance(role, str) else None
        if cls is None:
            raise ValidationError(f"role must be one of {sorted(ROLE_CLASSES)}, got {role!r:.60}")
        check_optional_text(name, "name")
        check_optional_json(metadata, "metadata")
        stamped = {**(metadata or {}), "dialog_id": dialog_id}
        return await self.tasks.add_message(
            dialog_id, cls(content=content, name=name, metadata=stamped)
        )

    async def put_text(
        self,
        dialog_id: str,
        text: str,
        name: str | None = None,
        metadata: dict[str, Any] | None = None,
        role: str = "user",
    ) -> AnyMessage:
        """Append raw text as a message (stateless: the top prompt is reset).

        Args:
            dialog_id: The dialog (a task id).
            text: The text.
            name: The author's name, kept on the message.
            metadata: JSON-like dict with string keys, kept on the message (the dialog id is
                added under `dialog_id`).
            role: `"user"`, `"system"` or `"assistant"`.

        Returns:
            The stored message.

        Raises:
            ValidationError: A text that is not a string, an unknown role, a name that is not a
                string, metadata that is not a dict with string keys.
            NotFound: No such dialog in this view.

        Example:
            ```python
            await acme.dialogs.put_text(dialog.id, "Which hotel is closer?", name="alice")
            ```
        """
        if not isinstance(text, str):
            raise WrongType(f"text must be a string (put_text), got {type(text).__name__}")
        return await self._put(dialog_id, role, [TextPart(text=text)], name, metadata)

    async def put_image(self, dialog_id: str, image: str | Path | bytes, caption: str | None = None,
                        name: str | None = None, metadata: dict[str, Any] | None = None,
                        role: str = "user") -> AnyMessage:  # fmt: skip
        """Append an image as a message: base64 text, raw bytes, or a file path.

        Args:
            dialog_id: The dialog (a task id).
            image: Base64 text, raw bytes, or the path of an image file (read off the event
                loop; its MIME type guessed from the name).
            caption: A text part after the image.
            name: The author's name, kept on the message.
            metadata: JSON-like dict with string keys, kept on the message (the dialog id is
                added under `dialog_id`).
            role: `"user"`, `"system"` or `"assistant"`.

        Returns:
            The stored message.

        Raises:
            ValidationError: An image of another type, or a bad role, name or metadata.
            NotFound: No such dialog in this view.
        """
        mime = None
        if isinstance(image, bytes):
            data = base64.b64encode(image).decode()
        elif isinstance(image, Path) or (
            isinstance(image, str) and await asyncio.to_thread(Path(image).is_file)
        ):
            path = Path(image)  # read off the event loop: a file can be large or slow to read
            data = base64.b64encode(await asyncio.to_thread(path.read_bytes)).decode()
            mime = mimetypes.guess_type(path.name)[0]
        elif isinstance(image, str):
            data = image
        else:
            raise ValidationError("put_image expects base64 text, bytes or a file path")
        content: list[Any] = [ImagePart(image=data, mime_type=mime)]
        if caption:
            content.append(TextPart(text=caption))
        return await self._put(dialog_id, role, content, name, metadata)

    async def put_prompt(
        self,
        dialog_id: str,
        prompt: str,
        prompt_args: dict[str, Any] | None = None,
        *,
        registry: PromptRegistry,
        name: str | None = None,
        metadata: dict[str, Any] | None = None,
        role: str = "user",
    ) -> AnyMessage:
        """Render `registry[prompt]` with `prompt_args`, append it, and make it the top prompt.

        A registry value is a `str.format` template or a callable taking the args as keywords.
        The message records the prompt's name (`metadata["prompt_path"]`): `top_prompt` reads it
        until another message is appended.

        Args:
            dialog_id: The dialog (a task id).
            prompt: The prompt's name in `registry`.
            prompt_args: The template's arguments (a dict with string keys).
            registry: Prompt name -> template string or callable.
            name: The author's name, kept on the message.
            metadata: JSON-like dict with string keys, kept on the message (the dialog id is
                added under `dialog_id`).
            role: `"user"`, `"system"` or `"assistant"`.

        Returns:
            The stored message.

        Raises:
            NotFound: No prompt of that name in the registry, or no such dialog.
            ValidationError: A prompt name that is not a string, arguments that are not a dict
                with string keys, a template that does not render, or a bad role, name or
                metadata.

        Example:
            ```python
            prompts = {"greet": "Hello {name}, where to?"}
            await acme.dialogs.put_prompt(dialog.id, "greet", {"name": "Ana"}, registry=prompts)
            await acme.dialogs.top_prompt(dialog.id)  # "greet"
            ```
        """
        check_prompt_call(prompt, prompt_args, registry)
        check_optional_json(metadata, "metadata")
        text = render_prompt(registry, prompt, prompt_args)
        return await self._put(
            dialog_id, role, [TextPart(text=text)], name, {**(metadata or {}), PROMPT_KEY: prompt}
        )

    async def top_prompt(self, dialog_id: str) -> str | None:
        """The prompt governing the next turn: set by `put_prompt`, reset by any other append.

        Args:
            dialog_id: The dialog (a task id).

        Returns:
            The prompt's name, or None.

        Raises:
            NotFound: No such dialog in this view.
        """
        tail = await self.tail(dialog_id)
        return ((getattr(tail, "metadata", None) or {}).get(PROMPT_KEY)) if tail else None

    async def head(self, dialog_id: str) -> AnyMessage | None:
        """The dialog's first message (its system prompt, when it has one).

        Args:
            dialog_id: The dialog (a task id).

        Returns:
            The message, or None for an empty dialog.

        Raises:
            NotFound: No such dialog in this view.
        """
        messages = await self.tasks.messages(dialog_id, start=0, limit=1)
        return messages[0] if messages else None

    async def tail(self, dialog_id: str) -> AnyMessage | None:
        """The dialog's last message.

        Args:
            dialog_id: The dialog (a task id).

        Returns:
            The message, or None for an empty dialog.

        Raises:
            NotFound: No such dialog in this view.
        """
        messages = await self.tasks.tail(dialog_id, 1)
        return messages[-1] if messages else None

    async def cost(self, dialog_id: str) -> UsageTotals:
        """The dialog's token and dollar totals (the task header's running roll-up; no messages
        are read).

        Args:
            dialog_id: The dialog (a task id).

        Returns:
            The `UsageTotals`.

        Raises:
            NotFound: No such dialog in this view.
        """
        return (await self.tasks.get(dialog_id)).usage

    async def overview(self, dialog_id: str) -> str:
        """A short text overview of the dialog's messages, one line each (role and a preview).

        Args:
            dialog_id: The dialog (a task id).

        Returns:
            The overview text.

        Raises:
            NotFound: No such dialog in this view.
        """
        return tree.message_overview(await self.tasks.messages(dialog_id))

    # ------------------------------------------------------------------ fork
    async def fork(
        self,
        dialog_id: str,
        last_n: int = 0,
        first_k: int = 1,
        owner: str | None = None,
        at: str | None = None,
    ) -> TaskRecord:
        """A child dialog with copies of the kept messages: the parent's first `first_k` and last
        `last_n` (all of them when `last_n` is 0), or the history up to `at`.

        The child is a new task with its own copies (its header recomputed from what it kept)
        and a tree node under the parent; the parent is unchanged. Two inserts: the child task,
        then its node (a fork cut short in between is finished or removed by `repair()`).

        Args:
            dialog_id: The dialog to fork (the parent).
            last_n: Keep the last `last_n` messages (0: keep everything).
            first_k: With `last_n`, also keep the first `first_k` (e.g. the system prompt).
            owner: The child's owner (default: the parent's).
            at: Fork from an earlier point: the history up to and including this message.

        Returns:
            The child's task record.

        Raises:
            NotFound: No such dialog, or no message `at` in it.
            ValidationError: A bad count, owner or message id.

        Example:
            ```python
            child = await acme.dialogs.fork(task.id, last_n=10, first_k=1)
            print(await acme.dialogs.tree_overview(task.id))
            ```
        """
        check_int(last_n, "last_n")
        check_int(first_k, "first_k")
        owner = check_owner(owner)
        if at is not None:
            check_message_id(at, "at")
        parent = await self.node(dialog_id)  # reads first: a refused fork writes nothing
        child_id = new_id()
        running = operations.current()
        if running is not None:
            running.note = UNNAMED_FORK
        if at is None and last_n > 0:  # a trimmed fork reads only the ends it keeps
            count, head, tail = await self.tasks.ends(dialog_id, max(first_k, 0), last_n)
            indexes = tree.kept_indexes(count, last_n, first_k)
            if len(indexes) < count:
                window = dict(enumerate(head))
                window.update({count - len(tail) + i: m for i, m in enumerate(tail)})
                copies = tree.fork_copies(dialog_id, child_id, window, indexes)
            else:
                copies = None
        else:
            copies = None
        if copies is None:
            history = await self.tasks.messages(dialog_id)
            if at is not None:
                position = next((i for i, m in enumerate(history) if m.id == at), None)
                if position is None:
                    raise NotFound(f"no message {at!r} in dialog {dialog_id!r}")
                history = history[: position + 1]
            indexes = tree.kept_indexes(len(history), last_n, first_k)
            copies = tree.fork_copies(dialog_id, child_id, history, indexes)
        source = await self.tasks.get(dialog_id)
        if parent.created_at is None:  # an implicit root becomes real before it gets a child
            parent = await self.nodes.ensure(dialog_id)
        node = tree.child_node(parent, child_id, owner, len(copies), last_n, first_k, at)
        marker = {FORK_MARKER: node.model_dump(exclude={"created_at"})}
        record = await self.tasks.create(owner=node.owner, title=source.title, task_id=child_id,
                                         messages=copies, metadata=marker, replay=True)  # fmt: skip
        await self.nodes.insert(node)
        return record

    # ------------------------------------------------------------------ tree queries
    async def children(self, dialog_id: str) -> list[DialogNode]:
        """The dialog's direct forks, breadth-first ordered.

        Args:
            dialog_id: The dialog (a task id).

        Returns:
            The children's `DialogNode`s.

        Raises:
            NotFound: No such dialog in this view.
        """
        return await self.nodes.children(dialog_id)

    async def forked(self, dialog_ids: Sequence[str]) -> set[str]:
        """Which of these dialogs are in a tree with a fork: a fork's child or its parent.

        Two indexed reads whatever the count, each bounded by the ids given (`_id` and
        `parent_id` by `$in`), so a listing can tell which of its tasks have a tree worth
        showing without reading any tree.

        Args:
            dialog_ids: Up to 1,000 dialog (task) ids.

        Returns:
            The ids among them that were forked or are forks.

        Raises:
            ValidationError: An id that is not a task id, or more than 1,000 of them.
        """
        return await self.nodes.forked(dialog_ids)

    async def ancestors(self, dialog_id: str) -> list[str]:
        """The ids from the root down to the dialog's parent.

        Args:
            dialog_id: The dialog (a task id).

        Returns:
            The ids (empty for a root).

        Raises:
            NotFound: No such dialog in this view.
        """
        return list((await self.node(dialog_id)).ancestors)

    async def depth(self, dialog_id: str) -> int:
        """How many forks lie between the root and this dialog (0 for a root).

        Args:
            dialog_id: The dialog (a task id).

        Returns:
            The depth.

        Raises:
            NotFound: No such dialog in this view.
        """
        return (await self.node(dialog_id)).depth

    async def root(self, dialog_id: str) -> str:
        """The id of the tree's root dialog.

        Args:
            dialog_id: The dialog (a task id).

        Returns:
            The root's id (the dialog's own for a root).

        Raises:
            NotFound: No such dialog in this view.
        """
        return (await self.node(dialog_id)).root_id

    async def subtree_ids(self, dialog_id: str) -> list[str]:
        """The dialog and every descendant, breadth first.

        Args:
            dialog_id: The dialog (a task id).

        Returns:
            The ids, the dialog first.

        Raises:
            NotFound: No such dialog in this view.
        """
        nodes = await self.nodes.subtree(dialog_id)
        return [n.dialog_id for n in tree.bfs_order(nodes[0].dialog_id, nodes)]

    async def tree_overview(self, dialog_id: str) -> str:
        """An indented text tree of the subtree under `dialog_id`, with message counts.

        Args:
            dialog_id: The dialog (a task id).

        Returns:
            The tree as text (what `mindstore tasks tree` prints).

        Raises:
            NotFound: No such dialog in this view.
        """
        nodes = await self.nodes.subtree(dialog_id)
        counts = await self.nodes.message_counts([n.dialog_id for n in nodes])
        return tree.tree_overview(nodes[0].dialog_id, nodes, counts)

    async def tree_json(self, dialog_id: str) -> dict[str, Any]:
        """The subtree under `dialog_id` as nested dicts: `dialog_id`, `depth`, `messages` and
        `children`.

        Args:
            dialog_id: The dialog (a task id).

        Returns:
            The root of the nested tree.

        Raises:
            NotFound: No such dialog in this view.
        """
        nodes = await self.nodes.subtree(dialog_id)
        counts = await self.nodes.message_counts([n.dialog_id for n in nodes])
        return tree.tree_json(nodes[0].dialog_id, nodes, counts)

    # ------------------------------------------------------------------ delete and repair
    async def delete(self, dialog_id: str, cascade: bool = False) -> list[str]:
        """Delete a dialog, and with `cascade` its whole subtree, deepest first.

        Args:
            dialog_id: The dialog (a task id).
            cascade: Also delete every descendant (without it a dialog with forks is refused).

        Returns:
            The deleted ids, deepest first.

        Raises:
            Conflict: The dialog has descendants and `cascade` is False.
            NotFound: No such dialog in this view.
        """
        return await self.repairs.delete(dialog_id, cascade)

    async def repair(self, *, grace: timedelta = ORPHAN_GRACE) -> dict[str, list[str]]:
        """Finish or remove half-made forks, drop nodes whose task is gone, and remove the sealed
        pages no task counts. Safe to run at any time.

        A fork whose node is missing is finished when its parent's node exists (the plan is in
        the task's metadata), else its task is removed. A page is removed when its task does not
        exist, or when it lies at or past its task's mark and carries another `born` (a deleted
        namesake's, a crashed create's), and it was written more than `grace` ago (a create under
        way has its pages written before its task). Pages belong to no owner: an owner-scoped
        view leaves them to the tenant's repair.

        Args:
            grace: How old an orphan page must be before it is removed (zero only when no
                create can be running).

        Returns:
            What was done: `finished`, `removed_tasks`, `removed_nodes` (dialog ids), and
            `removed_pages` (page ids) when there were some.

        Raises:
            ValidationError: `grace` is not a timedelta of zero or more.
        """
        return await self.repairs.repair(grace=grace)

    # -- the dialog document dict form ----------------------------------------------------
    async def export_dialog(self, dialog_id: str) -> dict[str, Any]:
        """The dialog as one dict: messages (stored form), tree node and top prompt path, the form
        `import_dialog` reads back.

        Args:
            dialog_id: The dialog (a task id).

        Returns:
            `{"dialog_id", "owner", "title", "messages", "tree_node", "top_prompt_path"}`.

        Raises:
            NotFound: No such dialog in this view.
        """
        return await self.transfer.export_dialog(dialog_id)

    async def export_tree(self, dialog_id: str) -> list[dict[str, Any]]:
        """Every dialog of the subtree as `export_dialog` dicts, parents before children (so they
        import back in order).

        Args:
            dialog_id: The dialog (a task id).

        Returns:
            The dicts.

        Raises:
            NotFound: No such dialog in this view.
        """
        return [await self.export_dialog(i) for i in await self.subtree_ids(dialog_id)]

    async def import_dialog(self, data: Mapping[str, Any]) -> TaskRecord:
        """Store a dialog from its `export_dialog` dict; its parent (if any) must exist already.

        Everything is checked before the first write; then one insert for the task and one for
        its node (a crash in between is what `repair()` finishes).

        Args:
            data: The dict: `messages` (stored form, or `{"role", "content": "text"}`),
                optional `dialog_id`, `owner`, `title` and `tree_node` (`parent_id`,
                `split_point`, `last_n`, `first_k`, `at_message_id`).

        Returns:
            The stored task's record.

        Raises:
            ValidationError: A malformed dict or message.
            NotFound: The parent does not exist in this view.
            Conflict: The dialog id is already in use.
        """
        return await self.transfer.import_dialog(data)
