"""Imports flow one way: no cycle, lazy and TYPE_CHECKING imports included.

Reads every `import` in src/mindstore with `ast` (so imports inside functions and under
`if TYPE_CHECKING:` count too) and checks the layer rules of docs/architecture.md.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "mindstore"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    own = module_name(path)
    package = own if path.name == "__init__.py" else own.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return {name for name in found if name.startswith("mindstore")}


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


GRAPH = {
    name: {target for raw in imports_of(path) if (target := resolve(raw)) and target != name}
    for name, path in MODULES.items()
}


def test_no_import_cycles() -> None:
    """A module importing its own package (`from mindstore.backends import x` inside
    `mindstore.backends.embedded`) is left out: that edge is the package, not a layer."""
    graph = {name: {t for t in targets if not name.startswith(t + ".")} for name, targets in GRAPH.items()}
    seen: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        seen[node] = 1
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if seen.get(target) == 1:
                cycle = stack[stack.index(target):] + [target]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if target not in seen:
                visit(target)
        stack.pop()
        seen[node] = 2

    for name in sorted(graph):
        if name not in seen:
            visit(name)


@pytest.mark.parametrize(("layer", "forbidden"), [
    ("mindstore.repositories", ("mindstore.compression", "mindstore.services", "mindstore.store",
                                "mindstore.commands", "mindstore.cli")),
    ("mindstore.model", ("mindstore.repositories", "mindstore.compression", "mindstore.services",
                         "mindstore.store", "mindstore.backends", "mindstore.documents")),
    ("mindstore.pipelines", ("mindstore.repositories", "mindstore.store", "mindstore.backends")),
    ("mindstore.compression", ("mindstore.services", "mindstore.store", "mindstore.commands")),
    ("mindstore.commands", ("mindstore.cli",)),
])  # fmt: skip
def test_layers_import_only_downwards(layer: str, forbidden: tuple[str, ...]) -> None:
    wrong = sorted(
        f"{name} -> {target}"
        for name, targets in GRAPH.items() if name == layer or name.startswith(layer + ".")
        for target in targets if target.startswith(forbidden)
    )  # fmt: skip
    assert not wrong, wrong
