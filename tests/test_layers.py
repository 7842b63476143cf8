"""Imports flow one way: no cycle, and every import points down the layers.

Reads every `import` in src/mindstore with `ast` (so imports inside functions and under
`if TYPE_CHECKING:` count too). The layer order is written once, in docs/architecture.md
("Layers"): one line per layer, bottom first, peers on one line separated by commas.
Three rules ride on it: above the views (`protocols`) only `store` imports a repository
module; the framework integrations are leaves (only `backup` imports one); and an upward
import is allowed only where `LAZY_UPWARD` names it with its reason, and only where it
runs on first use (in a function), never when the module is imported.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PACKAGE = SRC / "mindstore"
ARCHITECTURE = ROOT / "docs" / "architecture.md"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def resolve(name: str) -> str | None:
    """The module of mindstore that `name` (a module or a name inside one) is."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    lazy: bool = False
    """Inside a function or under `if TYPE_CHECKING:`: not run when `source` is imported."""

    def where(self) -> str:
        return f"{MODULES[self.source].relative_to(SRC)}:{self.line} imports {self.target}"


def imports_of(path: Path) -> list[Edge]:
    """Every mindstore module `path` imports, with the line. `from pkg import name` imports
    `pkg` and, when it is a module, `pkg.name`; from the top package only the module
    (`from mindstore import formats` needs `mindstore.formats`, not the facade)."""
    tree = ast.parse(path.read_text(), str(path))
    own = module_name(path)
    package = own if path.name == "__init__.py" else own.rsplit(".", 1)[0]
    deferred = {id(inner) for node in ast.walk(tree) for inner in _deferred_body(node)}
    found: list[tuple[str, int, bool]] = []
    for node in ast.walk(tree):
        lazy = id(node) in deferred
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno, lazy) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            for alias in node.names:
                child = f"{target}.{alias.name}"
                if child in MODULES:
                    found.append((child, node.lineno, lazy))
                if child not in MODULES or target != "mindstore":  # a package's __init__ runs
                    found.append((target, node.lineno, lazy))
    edges = []
    for raw, line, lazy in found:
        target = resolve(raw) if raw.startswith("mindstore") else None
        if target and target != own:
            edges.append(Edge(own, target, line, lazy))
    return edges


def _deferred_body(node: ast.AST) -> list[ast.AST]:
    """What under `node` does not run at import: a function's body, an
    `if TYPE_CHECKING:` block."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        return [inner for part in ast.iter_child_nodes(node) for inner in ast.walk(part)]
    if isinstance(node, ast.If) and ast.unparse(node.test) in (
        "TYPE_CHECKING",
        "typing.TYPE_CHECKING",
    ):
        return [inner for part in node.body for inner in ast.walk(part)]
    return []


EDGES = [edge for path in MODULES.values() for edge in imports_of(path)]
GRAPH: dict[str, set[str]] = {name: set() for name in MODULES}
for _edge in EDGES:
    GRAPH[_edge.source].add(_edge.target)


def unit_of(module: str) -> str:
    """The layered unit a module belongs to: its top-level package or module under
    mindstore (`mindstore.repositories.tasks` -> `repositories`), `mindstore` for the
    facade."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "mindstore"


def layers_from(text: str) -> list[list[str]]:
    """The first ```text block after the "## Layers" heading: one layer a line, bottom
    first, peers separated by commas."""
    section = text.split("\n## Layers\n", 1)
    assert len(section) == 2, f"{ARCHITECTURE.name} has no '## Layers' section"
    block = re.search(r"```text\n(.*?)\n```", section[1], re.S)
    assert block, f"{ARCHITECTURE.name}, '## Layers': no ```text block with the order"
    return [[name.strip() for name in line.split(",")]
            for line in block.group(1).splitlines() if line.strip()]  # fmt: skip


LAYERS = layers_from(ARCHITECTURE.read_text())
RANK = {unit: rank for rank, layer in enumerate(LAYERS) for unit in layer}

LAZY_UPWARD = {
    ("mindstore.documents", "mindstore.integrations.langgraph_documents"): (
        "the former home of the stored shapes still answers for the LangGraph saver's three "
        "Beanie models, as before their move into the integration: loaded on first use "
        "(module `__getattr__`), so importing it loads no integration"
    ),
}
"""The upward imports allowed, each with its reason: only lazy ones (see `Edge.lazy`)."""

INTEGRATIONS = "integrations"
INTEGRATION_USERS = {"backup", "exports", "imports"}
"""The units that import an integration module: backup, erase and retention follow the
LangGraph saver's threads by its key format (`integrations.langgraph_keys`); a data-subject
export reads the owner's LangGraph checkpoints through the saver (on first use, when the
extra is installed); `imports` writes a peer's conversations through mindstore's adapter
for that framework. Nothing else knows a framework (the facade, the console and the CLI
included)."""

VIEWS = "protocols"
VIEW_BUILDERS = {"store"}
"""Above `VIEWS` a unit sees tasks through the views and takes the records they return from
`protocols`; only these build the views out of repositories."""


def wrong_imports(
    edges: list[Edge],
    rank: dict[str, int],
    allowed: dict[tuple[str, str], str] = LAZY_UPWARD,
) -> list[str]:
    """A line for each import that does not point to a lower layer (one per file, line
    and layer: `from mindstore.backup import erase` is not reported twice), but for a lazy
    one `allowed` names."""
    wrong = []
    seen = set()
    for edge in edges:
        source, target = unit_of(edge.source), unit_of(edge.target)
        if source == target or source not in rank or target not in rank:
            continue
        if (edge.source, edge.line, target) in seen:
            continue
        seen.add((edge.source, edge.line, target))
        if _allowed(edge, allowed, rank):
            if not edge.lazy:
                wrong.append(f"{edge.where()}: allowed only on first use, not at import")
            continue
        if rank[target] == rank[source]:
            wrong.append(f"{edge.where()}: {source!r} and {target!r} are peers on one layer")
        elif rank[target] > rank[source]:
            wrong.append(f"{edge.where()}: {source!r} may not import {target!r}, a layer above")
    return sorted(wrong)


def test_every_unit_is_on_one_layer() -> None:
    """A new package or top-level module must be placed (and a removed one taken out), so
    the order in docs/architecture.md stays the whole truth."""
    units = {unit_of(name) for name in MODULES}
    listed = [unit for layer in LAYERS for unit in layer]
    twice = sorted({unit for unit in listed if listed.count(unit) > 1})
    assert not twice, f"on more than one line of '## Layers': {twice}"
    unplaced = sorted(units - set(listed))
    assert not unplaced, (
        f"on no line of '## Layers' in docs/architecture.md: {unplaced} "
        "(add each where its imports allow)"
    )
    stale = sorted(set(listed) - units)
    assert not stale, f"'## Layers' names what src/mindstore does not have: {stale}"


def repository_imports_above_the_views(edges: list[Edge], rank: dict[str, int]) -> list[str]:
    """A line for each import of a repository module by a unit above the views (`VIEWS`)
    other than a `VIEW_BUILDERS` one: an adapter, the console or the CLI takes a record
    type from `protocols`, not from the repository that makes it."""
    return sorted({
        f"{edge.where()}: {unit_of(edge.source)!r} is above the views (take it from "
        f"mindstore.{VIEWS})"
        for edge in edges
        if unit_of(edge.target) == "repositories"
        and rank.get(unit_of(edge.source), -1) > rank[VIEWS]
        and unit_of(edge.source) not in VIEW_BUILDERS
    })  # fmt: skip


def integration_imports(
    edges: list[Edge], rank: dict[str, int], allowed: dict[tuple[str, str], str] = LAZY_UPWARD
) -> list[str]:
    """A line for each import of an integration module by a unit outside the integrations
    and `INTEGRATION_USERS`, but for an allowed lazy one (`wrong_imports` checks those)."""
    return sorted({
        f"{edge.where()}: {unit_of(edge.source)!r} may not know a framework integration"
        for edge in edges
        if unit_of(edge.target) == INTEGRATIONS
        and unit_of(edge.source) not in {INTEGRATIONS, *INTEGRATION_USERS}
        and not (edge.lazy and _allowed(edge, allowed, rank))
    })  # fmt: skip


def _allowed(edge: Edge, allowed: dict[tuple[str, str], str], rank: dict[str, int]) -> bool:
    """`edge` is an allowed upward one, or the import of a package it needs (importing a
    module runs its packages' `__init__` too). An allowance for an import that is not
    upward is void: its module sits above what it imports, out of its place."""
    if rank.get(unit_of(edge.source), -1) >= rank.get(unit_of(edge.target), -1):
        return False
    return any(
        edge.source == source and (edge.target == target or target.startswith(edge.target + "."))
        for source, target in allowed
    )


def test_layers_import_only_downwards() -> None:
    wrong = wrong_imports(EDGES, RANK)
    assert not wrong, "imports against the layers of docs/architecture.md:\n" + "\n".join(wrong)


def test_above_the_views_only_the_store_imports_a_repository() -> None:
    wrong = repository_imports_above_the_views(EDGES, RANK)
    assert not wrong, "repository imports above the views:\n" + "\n".join(wrong)


def test_no_unit_but_backup_and_imports_imports_an_integration() -> None:
    wrong = integration_imports(EDGES, RANK)
    assert not wrong, "framework integrations imported:\n" + "\n".join(wrong)


def test_each_allowed_upward_import_is_there_and_lazy() -> None:
    """An allowance outliving its import, or for an import that is not upward, is
    dropped; and importing the module really leaves the target unloaded (the `ast`
    reading of laziness, checked once for real)."""
    edges = {(edge.source, edge.target): edge for edge in EDGES}
    stale = sorted(pair for pair in LAZY_UPWARD if pair not in edges)
    assert not stale, f"LAZY_UPWARD names imports src/mindstore no longer has: {stale}"
    level = [pair for pair in LAZY_UPWARD
             if RANK[unit_of(pair[0])] >= RANK[unit_of(pair[1])]]  # fmt: skip
    assert not level, f"LAZY_UPWARD names imports that are not upward: {level}"
    for source, target in LAZY_UPWARD:
        code = f"import sys, {source}; print({target!r} in sys.modules)"
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              check=True, timeout=120)  # fmt: skip
        assert done.stdout.strip() == "False", f"importing {source} loads {target}"


def test_the_rules_name_a_lazy_import_loaded_eagerly_and_a_repository_above_the_views() -> None:
    """The checks themselves, on made-up edges: an allowed upward import that runs at
    import time is reported (as a layer and an integration import), the same import on
    first use is not; a console module importing a repository is reported, the store
    doing so is not."""
    documents, models = "mindstore.documents", "mindstore.integrations.langgraph_documents"
    rank = {"document_models": 0, "documents": 1, "repositories": 2, "protocols": 3,
            "integrations": 4, "store": 5, "console": 6}  # fmt: skip
    allowed = {(documents, models): "a reason"}
    eager, lazy = Edge(documents, models, 4), Edge(documents, models, 9, lazy=True)
    assert wrong_imports([eager, lazy], rank, allowed) == [
        "mindstore/documents.py:4 imports mindstore.integrations.langgraph_documents: "
        "allowed only on first use, not at import"
    ]
    assert integration_imports([eager, lazy], rank, allowed) == [
        "mindstore/documents.py:4 imports mindstore.integrations.langgraph_documents: "
        "'documents' may not know a framework integration"
    ]
    console = Edge("mindstore.console.readonly", "mindstore.repositories.records", 34)
    store = Edge("mindstore.store", "mindstore.repositories.dialogs", 30)
    assert repository_imports_above_the_views([console, store], rank) == [
        "mindstore/console/readonly.py:34 imports mindstore.repositories.records: "
        "'console' is above the views (take it from mindstore.protocols)"
    ]


def test_the_check_names_an_upward_and_a_sideways_import() -> None:
    """The check itself: a repository importing the store, and a peer importing a peer,
    are each reported with file, line and both layers (no real module needs breaking)."""
    repository, store = "mindstore.repositories.tasks", "mindstore.store"
    compression, analytics = "mindstore.compression.context", "mindstore.analytics.service"
    wrong = wrong_imports([Edge(repository, store, 7), Edge(compression, analytics, 9),
                           Edge(store, repository, 3)], RANK)  # fmt: skip
    assert wrong == [
        "mindstore/compression/context.py:9 imports mindstore.analytics.service: "
        "'compression' and 'analytics' are peers on one layer",
        "mindstore/repositories/tasks.py:7 imports mindstore.store: "
        "'repositories' may not import 'store', a layer above",
    ]


def test_the_order_is_read_from_the_doc() -> None:
    text = "intro\n## Layers\n\nbottom first\n\n```text\na, b\n\nc\n```\n\n## Next\n"
    assert layers_from(text) == [["a", "b"], ["c"]]
    with pytest.raises(AssertionError, match="no '## Layers' section"):
        layers_from("## Other\n```text\na\n```\n")


def test_no_import_cycles() -> None:
    """A module importing its own package (`from mindstore.backends import x` inside
    `mindstore.backends.embedded`) is left out: that edge is the package, not a layer."""
    graph = {
        name: {t for t in targets if not name.startswith(t + ".")}
        for name, targets in GRAPH.items()
    }
    seen: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        seen[node] = 1
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if seen.get(target) == 1:
                cycle = [*stack[stack.index(target) :], target]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if target not in seen:
                visit(target)
        stack.pop()
        seen[node] = 2

    for name in sorted(graph):
        if name not in seen:
            visit(name)
