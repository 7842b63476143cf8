"""No object reaches into another object's private names: a guard over all of src/mindstore.

A leading underscore says "this object's own business". A module that calls another
object's `_method()` or reads its `_field` depends on what that object may change without
notice; the collaborator offers a public seam instead (the LangGraph saver's
`langgraph_storage.ThreadStorage`, the planner's `open_tool_call` and `resize`, the window's
`truncated_border`). What is left is listed in `ALLOWED`, each with its reason; a private
call allowed there also carries a comment on its own line, so the reason is read where it
is called.

The rule, read with `ast`: `<expression>._name` (one leading underscore, not a dunder)
where the expression is not `self`, `cls` or `super()`, nor a module or class the file
imports or defines (`sys._getframe`, a library module's table, a class's own classmethod).
Calls are checked everywhere; reads and writes of private attributes everywhere but the
embedded backend's package, which adapts mongomock's internals by design
(docs/architecture.md, "Backends"): its private calls are listed like any other.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "mindstore"
ATTRIBUTES_UNCHECKED = "backends/embedded/"

ALLOWED = {
    # private calls (each line carries its reason as a comment too)
    ("imports/agent_framework.py", "provider._session_file_path"): (
        "the Agent Framework's file name of a session has no public form: an import refuses "
        "a file the provider itself would not read for that session"
    ),
    ("backends/embedded/id_lookup.py", "store._remove_expired_documents"): (
        "mongomock's TTL sweep, run before the indexed lookup as its own reads run it"
    ),
    ("backends/embedded/fast_update.py", "sync._ensure_uniques"): (
        "mongomock's unique-index check after an in-place update: a duplicate key raises"
    ),
    ("backends/embedded/finds.py", "collection._iter_documents"): (
        "mongomock's filtered walk of its stored documents, without the copy its finds make"
    ),
    ("backends/embedded/finds.py", "collection._get_dataset"): (
        "mongomock's find with a projection (the projected copies are its own)"
    ),
    ("backends/embedded/matching.py", "matcher._not_op"): (
        "mongomock's `$not`, kept as it is: the faster matcher runs its other operators"
    ),
    # private attributes
    ("backends/proxy.py", "value._inner"): "`unwrap`: the proxies' own field, in their module",
    ("backends/snapshot.py", "coll._store"): (
        "mongomock's stored documents: a snapshot copies them as they are, in insertion order"
    ),
    ("integrations/adk.py", "session._storage_update_marker"): (
        "Google ADK's stale-session marker on its `Session`: a session service sets it and "
        "checks it on append, as ADK's own services do (the framework offers no setter)"
    ),
    ("model/messages.py", "message._derived"): (
        "a classmethod filling the private field of the instance it has just built"
    ),
    ("repositories/task_reads.py", "task._header"): (
        "the in-memory Task's cached header, filled by `load` so it is not derived again"
    ),
    ("store.py", "store._locks"): (
        "a TenantStore shares the per-task write locks of the Store that scopes it"
    ),
}


@dataclass(frozen=True)
class Reach:
    path: str
    line: int
    expression: str
    call: bool

    def where(self) -> str:
        kind = "calls" if self.call else "reaches"
        return f"{self.path}:{self.line} {kind} {self.expression}"


def _own_names(tree: ast.Module) -> set[str]:
    """Names the module binds to modules and classes: its imports (anywhere), its
    top-level classes, and top-level aliases of either (`_filtering: Any = filtering`)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names.add(node.name)
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if isinstance(value, ast.Name) and value.id in names:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def _is_own(value: ast.expr, names: set[str]) -> bool:
    """`self`, `cls`, `super()`, or a dotted name rooted in a module or class of `names`."""
    if isinstance(value, ast.Call):
        return isinstance(value.func, ast.Name) and value.func.id == "super"
    while isinstance(value, ast.Attribute):
        value = value.value
    return isinstance(value, ast.Name) and (value.id in ("self", "cls") or value.id in names)


def reaches(source: str, path: str) -> list[Reach]:
    """Every reach into another object's private name in `source` (see the module doc)."""
    tree = ast.parse(source, path)
    names = _own_names(tree)
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
            continue
        if node.attr.startswith("__") or _is_own(node.value, names):
            continue
        call = id(node) in called
        if call or not path.startswith(ATTRIBUTES_UNCHECKED):
            found.append(Reach(path, node.lineno, ast.unparse(node), call))
    return sorted(found, key=lambda reach: (reach.path, reach.line))


def all_reaches() -> list[Reach]:
    return [
        reach
        for file in sorted(PACKAGE.rglob("*.py"))
        for reach in reaches(file.read_text(), file.relative_to(PACKAGE).as_posix())
    ]


REACHES = all_reaches()


def test_no_object_reaches_into_another_objects_private_names() -> None:
    unlisted = [reach.where() for reach in REACHES if (reach.path, reach.expression) not in ALLOWED]
    assert not unlisted, (
        "private names of another object (offer a public seam, or list it in ALLOWED with "
        "its reason):\n" + "\n".join(unlisted)
    )


def test_each_allowed_private_call_says_why_on_its_line() -> None:
    lines = {}
    silent = []
    for reach in REACHES:
        if not reach.call:
            continue
        if reach.path not in lines:
            lines[reach.path] = (PACKAGE / reach.path).read_text().splitlines()
        if "#" not in lines[reach.path][reach.line - 1]:
            silent.append(reach.where())
    assert not silent, "a private call without its reason on the line:\n" + "\n".join(silent)


def test_each_allowance_is_still_used() -> None:
    used = {(reach.path, reach.expression) for reach in REACHES}
    assert sorted(set(ALLOWED) - used) == []


def test_at_most_three_private_calls_are_left() -> None:
    """The bound on the project's own objects: three at most outside the embedded backend
    (none today). The embedded backend's calls into mongomock are its job (it adapts that
    library's internals by design): each is listed in `ALLOWED` with its reason, and each
    reaches into mongomock, never into a mindstore object."""
    calls = [reach for reach in REACHES if reach.call]
    ours = [reach.where() for reach in calls if not reach.path.startswith(ATTRIBUTES_UNCHECKED)]
    assert len(ours) <= 3, ours
    mongomock = {"store", "sync", "collection", "matcher"}
    embedded = [reach for reach in calls if reach.path.startswith(ATTRIBUTES_UNCHECKED)]
    assert all(reach.expression.split(".")[0] in mongomock for reach in embedded), embedded


def test_the_scan_tells_a_reach_from_an_own_name() -> None:
    """The rule itself, on made-up source: another object's private method and field are
    found; self, cls, super(), an imported module and a class of the module are not."""
    source = (
        "import sys\n"
        "class _Missing:\n"
        "    @classmethod\n"
        "    def _raise(cls): return cls._text\n"
        "class Saver:\n"
        "    def go(self, planner):\n"
        "        planner._resize(1, 2)\n"
        "        self._own(); super()._base(); sys._getframe(1); _Missing._raise()\n"
        "        return planner.header._cache\n"
    )
    assert [r.where() for r in reaches(source, "model/x.py")] == [
        "model/x.py:7 calls planner._resize",
        "model/x.py:9 reaches planner.header._cache",
    ]
    assert [r.where() for r in reaches(source, ATTRIBUTES_UNCHECKED + "x.py")] == [
        ATTRIBUTES_UNCHECKED + "x.py:7 calls planner._resize"
    ]
