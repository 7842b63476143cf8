"""What a plain install brings, and the README's install section that says how to get it.

`scripts/package-check` builds the wheel and runs README.md's install block and tour in a
new virtualenv (scripts/test runs it); these are the fast checks of the same promises."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
EXTRAS: dict[str, list[str]] = PROJECT["optional-dependencies"]
FRAMEWORK_EXTRAS = (
    "openai-agents",
    "langgraph",
    "pydantic-ai",
    "langchain",
    "adk",
    "llamaindex",
    "agent-framework",
)
REFUSED = {"motor", "mongomock-motor", "nanoid"}  # deprecated (motor) or untyped (nanoid)


def requirements(names: list[str]) -> dict[str, Requirement]:
    parsed = [Requirement(text) for text in names]
    return {requirement.name.lower(): requirement for requirement in parsed}


def upper_bound(requirement: Requirement) -> str | None:
    return next((s.version for s in requirement.specifier if s.operator in ("<", "<=")), None)


def lower_bound(requirement: Requirement) -> str | None:
    return next((s.version for s in requirement.specifier if s.operator == ">="), None)


def test_the_plain_install_brings_nothing_deprecated_or_untyped() -> None:
    assert not REFUSED & set(requirements(PROJECT["dependencies"]))


def test_no_module_imports_what_the_plain_install_no_longer_has() -> None:
    banned = {"motor", "mongomock_motor", "nanoid"}
    for path in (ROOT / "src" / "mindstore").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            assert not {name.split(".")[0] for name in names} & banned, (path, names)


def test_every_extra_is_bounded_above() -> None:
    """A framework's next breaking release must not reach users before the suite has run
    on it: every extra's requirement names its upper bound."""
    for extra in (*FRAMEWORK_EXTRAS, "yaml"):
        for name, requirement in requirements(EXTRAS[extra]).items():
            assert upper_bound(requirement), f"{extra}: {name} has no upper bound"


def test_the_runtime_dependencies_are_bounded_where_they_break() -> None:
    runtime = requirements(PROJECT["dependencies"])
    unbounded = {name for name, requirement in runtime.items() if not upper_bound(requirement)}
    assert unbounded <= {"rich"}, unbounded  # rich: Console and Table only, stable for years
    # the embedded backend patches mongomock's internals: no new minor unseen
    assert upper_bound(runtime["mongomock"]) == "4.4"


def test_the_test_extra_runs_the_frameworks_at_their_extras_bounds() -> None:
    """The suite drives every integration: it must install what a user's extra allows."""
    test = requirements(EXTRAS["test"])
    for extra in (*FRAMEWORK_EXTRAS, "yaml"):
        for name, requirement in requirements(EXTRAS[extra]).items():
            assert test[name].specifier == requirement.specifier, (extra, name)


def test_the_pydantic_ai_extra_admits_only_releases_with_the_api_the_docs_use() -> None:
    docs = (ROOT / "docs" / "integrations.md").read_text(encoding="utf-8")
    assert "from pydantic_ai.capabilities import ProcessHistory" in docs  # 2.0 and later
    requirement = requirements(EXTRAS["pydantic-ai"])["pydantic-ai-slim"]
    assert int((lower_bound(requirement) or "0").split(".")[0]) >= 2


def install_block() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert re.findall(r"^## (.+)$", readme, re.M)[0] == "Install"  # the README opens with it
    section = readme.split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None
    return block.group(1)


def test_the_readme_opens_with_how_to_install_this_version_without_extras() -> None:
    block = install_block()
    wheel = f"dist/mindstore-{PROJECT['version']}-py3-none-any.whl"
    commands = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    assert commands == [
        "python -m pip wheel --no-deps --wheel-dir dist .",
        f"python -m pip install {wheel}",
        "mindstore --version",
    ]
    assert f"# mindstore {PROJECT['version']}" in block


def test_the_package_check_runs_what_the_readme_says() -> None:
    check = (ROOT / "scripts" / "package-check").read_text(encoding="utf-8")
    assert "## Install" in check and "```python" in check
    test = (ROOT / "scripts" / "test").read_text(encoding="utf-8")
    assert "scripts/package-check" in test
