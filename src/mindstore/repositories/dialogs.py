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
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import mimetypes
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from pymongo.errors import DuplicateKeyError

from mindstore import operations
from mindstore.clock import utcnow
from mindstore.collection_names import DIALOG_NODES, TASK_PAGES, TASKS
from mindstore.draws import current_tape
from mindstore.errors import Conflict, NotFound, ValidationError, WrongType
from mindstore.ids import task_id_of, task_key
from mindstore.model import dialog as tree
from mindstore.model.base import new_id
from mindstore.model.dialog import FORK_MARKER, DialogNode
from mindstore.model.header import UsageTotals
from mindstore.model.messages import (
    AnyMessage,
    AssistantMessage,
    SystemMessage,
    UserMessage,
    parse_message,
)
from mindstore.model.parts import ImagePart, TextPart
from mindstore.model.plans import check_id, check_message_id
from mindstore.operations import Resilience
from mindstore.repositories.bulk_pages import ORPHAN_GRACE, remove_orphans
from mindstore.repositories.records import TaskRecord
from mindstore.repositories.tasks import TaskRepository
from mindstore.stored_documents import node_document
from mindstore.validation import (
    check_int,
    check_optional_int,
    check_optional_json,
    check_optional_text,
    check_owner,
    check_text,
)

UNNAMED_FORK = (
    "a fork draws its child's id: retried from this process it is exactly-once (the store "
    "keeps the id it drew), retried from another one it may fork twice (dialogs.repair() "
    "finishes the half-made one)"
)
"""What `Unavailable` says of a fork."""

PROMPT_KEY = "prompt_path"
"""Message metadata key put_prompt writes; the dialog's top prompt is the tail's value."""

ROLE_CLASSES = {"user": UserMessage, "system": SystemMessage, "assistant": AssistantMessage}
PromptRegistry = Mapping[str, "str | Callable[..., str]"]


@operations.operations("dialogs")
class DialogRepository:
    """The dialog document's Dialog verbs and tree queries for one tenant."""

    def __init__(self, tasks: TaskRepository) -> None:
        self.tenant = tasks.tenant
        self.owner = tasks.owner
        self.tasks = tasks
        database = tasks.database
        self._nodes = database[DIALOG_NODES]
        self._tasks = database[TASKS]
        self._pages = database[TASK_PAGES]

    @property
    def resilience(self) -> Resilience:
        """The tasks' retry policy and ledger (every method here is an operation)."""
        return self.tasks.resilience

    # ------------------------------------------------------------------ nodes
    def _scope(self, **fields: Any) -> dict[str, Any]:
        """A node (or task) filter in this view's scope: the tenant, and the owner if set."""
        query: dict[str, Any] = {"tenant": self.tenant, **fields}
        if self.owner is not None:
            query["owner"] = self.owner
        return query

    def _node_filter(self, dialog_id: str) -> dict[str, Any]:
        return self._scope(_id=task_key(self.tenant, check_id(dialog_id, "dialog id")))

    async def _insert_node(self, node: DialogNode) -> None:
        document = node_document(node, self.tenant)
        try:
            await self._nodes.insert_one(document)
        except DuplicateKeyError as exc:
            stored = await self._nodes.find_one({"_id": document["_id"], "tenant": self.tenant})
            if stored is not None and _same_node(stored, document):
                return  # this very node, written by an earlier attempt whose reply was lost
            raise Conflict(f"dialog {node.dialog_id!r} already has a tree node") from exc

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
        document = await self._nodes.find_one(self._node_filter(dialog_id))
        if document is not None:
            return DialogNode.from_document(document)
        record = await self.tasks.get(dialog_id)  # NotFound for a missing task
        if (record.metadata or {}).get(FORK_MARKER):
            raise NotFound(f"dialog {dialog_id!r} is an unfinished fork; run dialogs.repair()")
        return DialogNode(dialog_id=record.id, owner=record.owner, root_id=record.id)

    async def _ensure_node(self, dialog_id: str) -> DialogNode:
        node = await self.node(dialog_id)
        if node.created_at is None:  # an implicit root: make it real before it gets children
            with contextlib.suppress(Conflict):  # a concurrent fork wrote it first
                await self._insert_node(node)
            node = await self.node(dialog_id)
        return node

    async def _subtree_nodes(self, dialog_id: str) -> list[DialogNode]:
        """The node and all its descendants: one indexed query on `ancestors`."""
        root = await self.node(dialog_id)
        cursor = self._nodes.find(self._scope(ancestors=root.dialog_id))
        return [root, *[DialogNode.from_document(d) async for d in cursor]]

    async def _message_counts(self, ids: Sequence[str]) -> dict[str, int]:
        keys = [task_key(self.tenant, i) for i in ids]
        cursor = self._tasks.find(self._scope(_id={"$in": keys}), {"seq": 1})
        return {
            task_id_of(document["_id"]): int(document.get("seq", 0)) async for document in cursor
        }

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
        await self._insert_node(DialogNode(dialog_id=record.id, owner=owner, root_id=record.id))
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
        check_text(prompt, "prompt")
        if not isinstance(registry, Mapping):
            raise WrongType(f"registry must be a mapping, got {type(registry).__name__}")
        if prompt_args is not None and not (
            isinstance(prompt_args, Mapping) and all(isinstance(k, str) for k in prompt_args)
        ):
            raise WrongType("prompt_args must be a dict with string keys")
        check_optional_json(metadata, "metadata")
        if prompt not in registry:
            raise NotFound(f"no prompt {prompt!r} in the registry")
        template = registry[prompt]
        if not (callable(template) or isinstance(template, str)):
            raise WrongType(f"registry[{prompt!r}] must be a template string or a callable")
        try:
            text = (
                template(**(prompt_args or {}))
                if callable(template)
                else template.format(**(prompt_args or {}))
            )
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise ValidationError(f"prompt {prompt!r} could not be rendered: {exc!r}") from exc
        check_text(text, f"prompt {prompt!r} rendered")
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
            parent = await self._ensure_node(dialog_id)
        node = tree.child_node(parent, child_id, owner, len(copies), last_n, first_k, at)
        marker = {FORK_MARKER: node.model_dump(exclude={"created_at"})}
        record = await self.tasks.create(owner=node.owner, title=source.title, task_id=child_id,
                                         messages=copies, metadata=marker, replay=True)  # fmt: skip
        await self._insert_node(node)
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
        parent = await self.node(dialog_id)
        cursor = self._nodes.find(self._scope(parent_id=parent.dialog_id))
        nodes = [DialogNode.from_document(d) async for d in cursor]
        return tree.bfs_order(parent.dialog_id, [parent, *nodes])[1:]

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
        if len(dialog_ids) > 1000:
            raise ValidationError("dialog_ids: at most 1000")
        ids = [check_id(i, "dialog id") for i in dialog_ids]
        if not ids:
            return set()
        keys = [task_key(self.tenant, i) for i in ids]
        children = self._nodes.find(self._scope(_id={"$in": keys}), {"parent_id": 1})
        found = {task_id_of(d["_id"]) async for d in children if d.get("parent_id")}
        parents = await self._nodes.distinct("parent_id", self._scope(parent_id={"$in": ids}))
        return found | {p for p in parents if isinstance(p, str)}

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
        nodes = await self._subtree_nodes(dialog_id)
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
        nodes = await self._subtree_nodes(dialog_id)
        counts = await self._message_counts([n.dialog_id for n in nodes])
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
        nodes = await self._subtree_nodes(dialog_id)
        counts = await self._message_counts([n.dialog_id for n in nodes])
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
        tape, noted = current_tape(), ("dialogs.delete", self._node_filter(dialog_id)["_id"])
        earlier = tape.recall(noted) if tape is not None else None
        try:
            nodes = await self._subtree_nodes(dialog_id)
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
                await self.tasks.delete(victim)
            except NotFound:
                await self._nodes.delete_one(
                    {"_id": task_key(self.tenant, victim), "tenant": self.tenant}
                )
        return earlier if isinstance(earlier, list) else doomed

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
        if not isinstance(grace, timedelta) or grace < timedelta(0):
            raise ValidationError(f"grace: expected a timedelta of zero or more, got {grace!r}")
        report: dict[str, list[str]] = {"finished": [], "removed_tasks": [], "removed_nodes": []}
        forks = self._tasks.find(
            self._scope(**{f"metadata.{FORK_MARKER}": {"$exists": True}}),
            {"_id": 1, f"metadata.{FORK_MARKER}": 1},
        )
        candidates = {task_id_of(d["_id"]): d["metadata"][FORK_MARKER] async for d in forks}
        present = {
            task_id_of(d["_id"])
            async for d in self._nodes.find(
                self._scope(_id={"$in": [task_key(self.tenant, i) for i in candidates]}), {"_id": 1}
            )
        }
        for task_id, plan in candidates.items():
            if task_id in present:
                continue
            parent_id = plan.get("parent_id")
            parent_exists = isinstance(parent_id, str) and await self._nodes.count_documents(
                {"tenant": self.tenant, "_id": task_key(self.tenant, parent_id)}, limit=1
            )
            if parent_exists:
                await self._insert_node(DialogNode(**plan))
                report["finished"].append(task_id)
            else:
                await self.tasks.delete(task_id)
                report["removed_tasks"].append(task_id)
        node_ids = [task_id_of(d["_id"]) async for d in self._nodes.find(self._scope(), {"_id": 1})]
        task_ids = {task_id_of(d["_id"]) async for d in self._tasks.find(
            {"tenant": self.tenant, "_id": {"$in": [task_key(self.tenant, i) for i in node_ids]}},
            {"_id": 1})}  # fmt: skip
        for node_id in node_ids:
            if node_id not in task_ids and not await self._nodes.count_documents(
                {"tenant": self.tenant, "parent_id": node_id}, limit=1
            ):
                await self._nodes.delete_one(
                    {"_id": task_key(self.tenant, node_id), "tenant": self.tenant}
                )
                report["removed_nodes"].append(node_id)
        if self.owner is None:
            pages = await remove_orphans(
                self._pages, self._tasks, self.tenant, before=utcnow() - grace
            )
            if pages:
                report["removed_pages"] = pages
        return report

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
        node = await self.node(dialog_id)
        record = await self.tasks.get(dialog_id)
        messages = await self.tasks.messages(dialog_id)
        children = [c.dialog_id for c in await self.children(dialog_id)]
        tail_meta = (getattr(messages[-1], "metadata", None) or {}) if messages else {}
        return {
            "dialog_id": dialog_id,
            "owner": record.owner,
            "title": record.title,
            "messages": [m.to_dict() for m in messages],
            "tree_node": tree.node_to_seed_dict(node, children),
            "top_prompt_path": tail_meta.get(PROMPT_KEY),
        }

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
        messages = [_seed_message(m) for m in data.get("messages", [])]
        # Everything is checked before the first write: the parent's node, then one insert
        # for the task, then its node (a crash in between is what `repair()` finishes).
        parent = await self.node(parent_id) if parent_id else None
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
        record = await self.tasks.create(
            owner=owner,
            title=data.get("title"),
            task_id=dialog_id,
            messages=messages,
            metadata=metadata,
            replay=True,
        )
        await self._insert_node(node)
        return record


def _same_node(stored: dict[str, Any], document: dict[str, Any]) -> bool:
    """Is the stored node the one `document` describes (its time of writing aside)?"""
    return {k: v for k, v in stored.items() if k != "created_at"} == {
        k: v for k, v in document.items() if k != "created_at"
    }


def _seed_message(data: Any) -> AnyMessage:
    """A stored-form message, or the dialog document's plainer form (content as a string)."""
    if not isinstance(data, dict):
        raise ValidationError("each message must be a dict")
    if isinstance(data.get("content"), str):
        data = {**data, "content": [{"type": "text", "text": data["content"]}]}
    return parse_message(data)
