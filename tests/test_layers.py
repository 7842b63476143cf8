"""Imports flow one way: no cycle, and every import points down the layers.

Reads every `import` in src/mindstore with `ast` (so imports inside functions and under
`if TYPE_CHECKING:` count too). The layer order is written once, in docs/architecture.md
("Layers"): one line per layer, bottom first, peers on one line separated by commas.
"""

from __future__ import annotations

import ast
import re
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

    def where(self) -> str:
        return f"{MODULES[self.source].relative_to(SRC)}:{self.line} imports {self.target}"


def imports_of(path: Path) -> list[Edge]:
    """Every mindstore module `path` imports, with the line. `from pkg import name` imports
    `pkg` and, when it is a module, `pkg.name`; from the top package only the module
    (`from mindstore import formats` needs `mindstore.formats`, not the facade)."""
    tree = ast.parse(path.read_text(), str(path))
    own = module_name(path)
    package = own if path.name == "__init__.py" else own.rsplit(".", 1)[0]
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
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
                    found.append((child, node.lineno))
                if child not in MODULES or target != "mindstore":  # a package's __init__ runs
                    found.append((target, node.lineno))
    edges = []
    for raw, line in found:
        target = resolve(raw) if raw.startswith("mindstore") else None
        if target and target != own:
            edges.append(Edge(own, target, line))
    return edges


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


def wrong_imports(edges: list[Edge], rank: dict[str, int]) -> list[str]:
    """A line for each import that does not point to a lower layer (one per file, line
    and layer: `from mindstore.backup import erase` is not reported twice)."""
    wrong = []
    seen = set()
    for edge in edges:
        source, target = unit_of(edge.source), unit_of(edge.target)
        if source == target or source not in rank or target not in rank:
            continue
        if (edge.source, edge.line, target) in seen:
            continue
        seen.add((edge.source, edge.line, target))
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


def test_layers_import_only_downwards() -> None:
    wrong = wrong_imports(EDGES, RANK)
    assert not wrong, "imports against the layers of docs/architecture.md:\n" + "\n".join(wrong)


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
