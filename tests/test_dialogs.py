"""Dialog trees (seed 002) on the store: forks, tree queries, delete, repair, import/export."""

from __future__ import annotations

import re
from collections import deque

import pytest

import mindstore
from mindstore.errors import Conflict, NotFound, ValidationError
from mindstore.ids import task_key
from mindstore.model.dialog import FORK_MARKER, kept_indexes
from mindstore.model.parts import TaskConfigPart, TextPart, ToolCallPart, ToolMetadata

SUB = TaskConfigPart(
    model_name="m", tool_metadata=[ToolMetadata(name="delegate", is_task_entry=True)]
)


async def dialog_with(d, count: int, owner: str = "coder") -> str:
    root = await d.create(owner, "You are a coder.")
    for i in range(count - 1):
        await d.put_text(root.id, f"message {i}")
    return root.id


async def texts(acme, dialog_id: str) -> list[str]:
    return [m.text() for m in await acme.tasks.messages(dialog_id)]


# ---------------------------------------------------------------- fork shapes
def test_kept_indexes_follow_the_seed():
    assert kept_indexes(6, last_n=0, first_k=1) == [0, 1, 2, 3, 4, 5]
    assert kept_indexes(6, last_n=3, first_k=1) == [0, 3, 4, 5]
    assert kept_indexes(6, last_n=2, first_k=2) == [0, 1, 4, 5]
    assert kept_indexes(6, last_n=5, first_k=1) == list(range(6))  # last_n + first_k >= len
    assert kept_indexes(0, last_n=3) == []
    with pytest.raises(ValidationError):
        kept_indexes(5, last_n=-1)


async def test_full_copy_and_trimmed_forks(acme):
    d = acme.dialogs
    root = await dialog_with(d, 6)
    full = await d.fork(root)
    trimmed = await d.fork(root, last_n=3, first_k=1)
    two = await d.fork(root, last_n=2, first_k=2)
    assert await texts(acme, full.id) == await texts(acme, root)
    original = await texts(acme, root)
    assert await texts(acme, trimmed.id) == [original[0], *original[-3:]]
    assert await texts(acme, two.id) == original[:2] + original[-2:]
    node = await d.node(trimmed.id)
    assert (
        node.parent_id,
        node.root_id,
        node.depth,
        node.split_point,
        node.last_n,
        node.first_k,
    ) == (root, root, 1, 4, 3, 1)
    copies = await acme.tasks.messages(trimmed.id)
    parent = await acme.tasks.messages(root)
    assert [m.origin.index for m in copies] == [0, 3, 4, 5]
    assert all(m.origin.task_id == root and m.task_id == trimmed.id for m in copies)
    assert [m.id for m in copies] == [parent[i].id for i in (0, 3, 4, 5)]


async def test_fork_at_an_earlier_message_for_edit_and_regenerate(acme):
    d = acme.dialogs
    root = await dialog_with(d, 5)
    history = await acme.tasks.messages(root)
    child = await d.fork(root, at=history[2].id)
    assert [m.id for m in await acme.tasks.messages(child.id)] == [m.id for m in history[:3]]
    assert (await d.node(child.id)).at_message_id == history[2].id
    await d.put_text(child.id, "edited question")
    assert (await texts(acme, child.id))[-1] == "edited question"
    with pytest.raises(NotFound):
        await d.fork(root, at="no-such-message")


async def test_fork_of_a_fork_keeps_the_first_origin(acme):
    d = acme.dialogs
    root = await dialog_with(d, 3)
    child = await d.fork(root)
    await d.put_text(child.id, "only in child")
    grandchild = await d.fork(child.id)
    messages = await acme.tasks.messages(grandchild.id)
    assert [m.origin.task_id for m in messages] == [root, root, root, child.id]
    assert await d.ancestors(grandchild.id) == [root, child.id]
    assert await d.depth(grandchild.id) == 2 and await d.root(grandchild.id) == root


async def test_fork_inside_an_open_sub_task_recomputes_the_header(acme):
    d, tasks = acme.dialogs, acme.tasks
    root = await dialog_with(d, 2)
    await tasks.add_task_config(root, SUB)
    assistant = await tasks.add_assistant_message(root)
    await tasks.add_tool_call_part(
        root, assistant.id, ToolCallPart(tool_call_id="c1", tool_name="delegate")
    )
    await tasks.add_task_entry(root, [TextPart(text="sub")], SUB, entry_id="entry1")
    await tasks.add_human_message(root, "inside the sub-task")
    full = await d.fork(root)
    assert (await tasks.get(full.id)).current_scope == "entry1"
    assert [m.id for m in await tasks.current_task_messages(full.id)] == [
        m.id for m in await tasks.current_task_messages(root)
    ]
    await tasks.add_task_exit(full.id, [TextPart(text="done in the fork")])
    assert (await tasks.get(full.id)).current_scope is None
    assert (await tasks.get(root)).current_scope == "entry1"  # the parent's sub-task is still open
    trimmed = await d.fork(root, last_n=1, first_k=1)  # the entry is not kept
    header = await tasks.header(trimmed.id)
    assert header.current_scope is None and header.level == 0
    kept = await tasks.messages(trimmed.id)
    assert [m.depth for m in kept] == [0, 0] and kept[-1].text() == "inside the sub-task"


async def test_writes_to_a_child_never_show_in_its_parent_and_back(acme):
    d = acme.dialogs
    root = await dialog_with(d, 2)
    child = await d.fork(root)
    before_parent, before_child = await texts(acme, root), await texts(acme, child.id)
    await d.put_text(child.id, "child only")
    await d.put_text(root, "parent only")
    assert await texts(acme, root) == [*before_parent, "parent only"]
    assert await texts(acme, child.id) == [*before_child, "child only"]
    first_child = (await acme.tasks.messages(child.id))[0]
    await acme.tasks.add_text_part(child.id, first_child.id, " (patched)")
    assert (await acme.tasks.messages(root))[0].text() == "You are a coder."


async def test_dialog_verbs(acme):
    d = acme.dialogs
    root = (await d.create("coder", "sys")).id
    registry = {"plan": "Plan {task} in {language}", "shout": lambda word: word.upper()}
    await d.put_prompt(root, "plan", {"task": "a parser", "language": "Python"}, registry=registry)
    assert await d.top_prompt(root) == "plan"
    assert (await d.tail(root)).text() == "Plan a parser in Python"
    await d.put_text(root, "plain", name="alice")
    assert await d.top_prompt(root) is None  # put_text resets the calling convention
    await d.put_prompt(root, "shout", {"word": "go"}, registry=registry, role="system")
    assert (await d.tail(root)).role == "system" and (await d.tail(root)).text() == "GO"
    image = await d.put_image(root, b"\x89PNG fake", caption="screen")
    assert image.content[0].type == "image" and image.content[1].text == "screen"
    assert (await d.head(root)).text() == "sys"
    assert (await d.tail(root)).metadata["dialog_id"] == root
    assert (await d.cost(root)).cost == 0
    overview = await d.overview(root)
    assert (
        overview.splitlines()[0].endswith("system(coder): sys") and "user(alice): plain" in overview
    )
    with pytest.raises(NotFound):
        await d.put_prompt(root, "missing", registry=registry)
    with pytest.raises(ValidationError):
        await d.put_prompt(root, "plan", {"task": "x"}, registry=registry)  # missing {language}
    with pytest.raises(ValidationError):
        await d.put_text(root, "x", role="wizard")
    with pytest.raises(ValidationError):
        await d.create("")
    with pytest.raises(ValidationError):
        await d.fork(root, last_n="3")


# ---------------------------------------------------------------- tree queries
OVERVIEW_LINE = re.compile(
    r"^( *)(└─ )?\[(.{8})\] owner=(\S+) msgs=(\d+) split@(\S+)( \(last_n=\d+, first_k=\d+\))?$"
)


async def test_tree_overview_in_the_seed_format(acme):
    d = acme.dialogs
    root = await dialog_with(d, 5)
    full = await d.fork(root)
    trimmed = await d.fork(root, last_n=2, first_k=1)
    nested = await d.fork(trimmed.id, owner="reviewer")
    lines = (await d.tree_overview(root)).splitlines()
    assert lines == [
        f"[{root[:8]}] owner=coder msgs=5 split@None",
        f"  └─ [{full.id[:8]}] owner=coder msgs=5 split@5",
        f"  └─ [{trimmed.id[:8]}] owner=coder msgs=3 split@3 (last_n=2, first_k=1)",
        f"    └─ [{nested.id[:8]}] owner=reviewer msgs=3 split@3",
    ]
    tree = await d.tree_json(root)
    assert [c["dialog_id"] for c in tree["children"]] == [full.id, trimmed.id]
    assert tree["children"][1]["children"][0]["messages"] == 3


async def test_tree_of_1000_nodes_depth_20(acme):
    d = acme.dialogs
    root = (await d.create("agent")).id
    parents, created = {root: None}, [root]
    spine = root
    for _ in range(19):  # a spine of depth 20 (root at depth 0, deepest at 19)... plus width
        spine = (await d.fork(spine)).id
        parents[spine] = None
        created.append(spine)
    index = 0
    while len(created) < 1000:
        parent = created[index % len(created)]
        child = (await d.fork(parent, owner=f"a{len(created) % 7}")).id
        created.append(child)
        index += 3
    nodes = {i: await d.node(i) for i in created[:50]} | {created[-1]: await d.node(created[-1])}
    assert max(n.depth for n in nodes.values()) >= 19
    # reference BFS from the parent links, siblings in creation order
    children: dict[str, list[str]] = {}
    for dialog_id in created[1:]:
        children.setdefault((await d.node(dialog_id)).parent_id, []).append(dialog_id)
    expected, queue = [], deque([root])
    while queue:
        current = queue.popleft()
        expected.append(current)
        queue.extend(children.get(current, []))
    assert await d.subtree_ids(root) == expected
    middle = created[25]
    sub = await d.subtree_ids(middle)
    assert sub[0] == middle and set(sub) == {
        i for i in created if i == middle or middle in (await d.ancestors(i))
    }
    assert [c.dialog_id for c in await d.children(root)] == children[root]
    assert len((await d.tree_overview(root)).splitlines()) == 1000
    deepest = max(created, key=lambda i: nodes.get(i).depth if i in nodes else -1)
    assert len(await d.ancestors(deepest)) == (await d.depth(deepest))


# ---------------------------------------------------------------- delete, repair
async def test_delete_refuses_with_children_unless_cascade(acme):
    d = acme.dialogs
    root = await dialog_with(d, 2)
    child = (await d.fork(root)).id
    grandchild = (await d.fork(child)).id
    sibling = (await d.fork(root)).id
    with pytest.raises(Conflict):
        await d.delete(root)
    with pytest.raises(Conflict):
        await acme.tasks.delete(child)  # the plain task delete is tree-aware too
    assert await d.delete(child, cascade=True) == [grandchild, child]
    assert await d.subtree_ids(root) == [root, sibling]
    for gone in (child, grandchild):
        with pytest.raises(NotFound):
            await acme.tasks.get(gone)
        with pytest.raises(NotFound):
            await d.node(gone)
    assert await d.delete(sibling) == [sibling]
    assert await d.delete(root) == [root]


async def test_repair_finishes_or_removes_half_made_forks(acme, store):
    d = acme.dialogs
    root = await dialog_with(d, 3)
    finished = (await d.fork(root)).id
    orphan_parent = (await d.fork(root)).id
    stranded = (await d.fork(orphan_parent)).id
    nodes = store.database["dialog_nodes"]
    # simulate crashes between the task insert and the node insert
    await nodes.delete_one({"_id": task_key("acme", finished), "tenant": "acme"})
    await nodes.delete_one({"_id": task_key("acme", stranded), "tenant": "acme"})
    await nodes.delete_one({"_id": task_key("acme", orphan_parent), "tenant": "acme"})
    await store.database["tasks"].delete_one(
        {"_id": task_key("acme", orphan_parent), "tenant": "acme"}
    )
    assert await d.subtree_ids(root) == [root]  # readers ignore half-made forks
    with pytest.raises(NotFound, match="unfinished fork"):
        await d.node(finished)
    report = await d.repair()
    assert report["finished"] == [finished] and report["removed_tasks"] == [stranded]
    assert await d.subtree_ids(root) == [root, finished]
    assert (await d.node(finished)).split_point == 3
    with pytest.raises(NotFound):
        await acme.tasks.get(stranded)
    assert await d.repair() == {"finished": [], "removed_tasks": [], "removed_nodes": []}


# ---------------------------------------------------------------- import / export, tenancy
async def test_export_import_round_trip_with_tree_metadata(acme, store):
    d = acme.dialogs
    root = await dialog_with(d, 4)
    child = (await d.fork(root, last_n=2, first_k=1)).id
    await d.put_prompt(child, "p", {}, registry={"p": "prompted"})
    exported = await d.export_tree(root)
    assert exported[1]["tree_node"]["parent_id"] == root and exported[1]["top_prompt_path"] == "p"
    assert exported[0]["tree_node"]["children_ids"] == [child]
    target = await mindstore.connect("embedded")  # ids are global: import into another store
    other = target.scoped("other").dialogs
    for item in exported:
        await other.import_dialog(item)
    again = await other.export_tree(root)
    strip = lambda items: [{**i, "tree_node": {**i["tree_node"]}} for i in items]  # noqa: E731
    assert strip(again) == strip(exported)
    seed_style = {
        "dialog_id": "legacy1",
        "owner": "old",
        "messages": [
            {"role": "system", "content": "be nice", "id": "s1"},
            {"role": "user", "content": "hi", "id": "u1"},
        ],
    }
    imported = await other.import_dialog(seed_style)
    assert [m.text() for m in await target.scoped("other").tasks.messages(imported.id)] == [
        "be nice",
        "hi",
    ]
    with pytest.raises(ValidationError):
        await other.import_dialog({"messages": "nope"})
    with pytest.raises(NotFound):
        await other.import_dialog(
            {"dialog_id": "x1", "messages": [], "tree_node": {"parent_id": "ghost"}}
        )
    with pytest.raises(Conflict):
        await acme.dialogs.import_dialog(exported[0])  # already there: refused, nothing changed
    await target.close()


async def test_tree_queries_are_tenant_isolated(acme, store):
    d = acme.dialogs
    root = await dialog_with(d, 2)
    child = (await d.fork(root)).id
    intruder = store.scoped("intruder").dialogs
    for call in (intruder.node(root), intruder.children(root), intruder.subtree_ids(root),
                 intruder.tree_overview(root), intruder.fork(root),
                 intruder.delete(child, cascade=True),
                 intruder.ancestors(child), intruder.export_dialog(root)):  # fmt: skip
        with pytest.raises(NotFound):
            await call
    assert await intruder.repair() == {"finished": [], "removed_tasks": [], "removed_nodes": []}
    assert await d.subtree_ids(root) == [root, child]
    record = await acme.tasks.get(child)
    assert FORK_MARKER in (record.metadata or {})


async def test_a_trimmed_fork_reads_only_the_ends_it_keeps(acme, store):
    d = acme.dialogs
    root = await dialog_with(d, 200)
    with store.backend.recorder.capture() as full_log:
        await d.fork(root)
    with store.backend.recorder.capture() as trimmed_log:
        trimmed = await d.fork(root, last_n=5, first_k=1)
    assert trimmed_log.bytes_received * 10 < full_log.bytes_received
    assert [m.origin.index for m in await acme.tasks.messages(trimmed.id)] == [
        0,
        195,
        196,
        197,
        198,
        199,
    ]


async def test_an_import_cut_between_its_two_writes_is_finished_by_repair(acme, store, monkeypatch):
    d = acme.dialogs
    root = await dialog_with(d, 3)
    exported = await d.export_dialog((await d.fork(root, last_n=1)).id)
    exported["dialog_id"] = "imported-child"
    calls = {"n": 0}
    original = d.nodes.insert

    async def crash_once(node):
        calls["n"] += 1
        raise RuntimeError("process died between the task insert and the node insert")

    monkeypatch.setattr(d.nodes, "insert", crash_once)
    with pytest.raises(RuntimeError):
        await d.import_dialog(exported)
    monkeypatch.setattr(d.nodes, "insert", original)
    assert "imported-child" not in await d.subtree_ids(root)  # readers ignore the half-import
    report = await d.repair()
    assert report["finished"] == ["imported-child"]
    assert (await d.node("imported-child")).parent_id == root
    # a bad tree node is refused before anything is written
    before = await store.database["tasks"].count_documents({})
    with pytest.raises(ValidationError):
        await d.import_dialog(
            {**exported, "dialog_id": "bad", "tree_node": {"parent_id": {"$ne": 1}}}
        )
    assert await store.database["tasks"].count_documents({}) == before
