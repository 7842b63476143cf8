"""Every public verb of the API reference has a docstring that documents it.

The reference site (`scripts/docs`, mkdocs + mkdocstrings) is built from these
docstrings, so a verb without one is a hole in the reference. For every public verb of
`acme.tasks`, `acme.dialogs`, `acme.analytics`, `acme.agents` (and the `Agent` it
returns), the formats and the framework integrations:

* it has its own docstring (not one inherited from a base class);
* every parameter is named in its ``Args:`` section, and the section names no parameter
  the signature lacks (hidden ``*args``/``**options`` would fail here);
* every error in its ``Raises:`` section is a real exception class (`mindstore.errors`
  or a builtin).
"""

from __future__ import annotations

import builtins
import importlib
import inspect
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import mindstore.errors
from mindstore.analytics.service import Analytics
from mindstore.repositories.dialogs import DialogRepository
from mindstore.services.agents import Agent, AgentRepository
from mindstore.services.tasks import TaskService

SERVICES: dict[str, type] = {
    "tasks": TaskService,
    "dialogs": DialogRepository,
    "analytics": Analytics,
    "agents": AgentRepository,
    "agent": Agent,
}
FORMATS = "mindstore.formats"
INTEGRATIONS: dict[str, tuple[str | None, list[str]]] = {
    # module: (the framework it needs, the public names)
    "mindstore.integrations": (None, ["task_id_for", "conversation_id_of"]),
    "mindstore.integrations.openai_agents": ("agents", ["MindstoreSession", "UsageHooks",
                                                        "drop_orphans", "session_settings_of"]),
    "mindstore.integrations.langgraph": ("langgraph", ["MindstoreSaver"]),
    "mindstore.integrations.pydantic_ai": ("pydantic_ai", [
        "load_messages", "save_messages", "history_processor", "to_model_messages",
        "from_model_messages"]),
    "mindstore.integrations.langchain": ("langchain_core", ["MindstoreChatMessageHistory"]),
    "mindstore.integrations.langchain_messages": ("langchain_core", ["to_langchain",
                                                                    "from_langchain"]),
    "mindstore.integrations.adk": ("google.adk", ["MindstoreSessionService"]),
    "mindstore.integrations.llamaindex": ("llama_index.core", ["MindstoreChatStore",
                                                              "MindstoreLegacyChatStore"]),
    "mindstore.integrations.agent_framework": ("agent_framework", ["MindstoreHistoryProvider"]),
}  # fmt: skip
SECTIONS = ("Args", "Returns", "Yields", "Raises", "Example", "Examples", "Note")


def _methods(cls: type, prefix: str) -> Iterator[tuple[str, Callable[..., Any]]]:
    """The public methods and properties of `cls` that mindstore defines (its own or a
    mindstore base class's; not pydantic's, not a framework's)."""
    for name in dir(cls):
        if name.startswith("_"):
            continue
        owner = next((c for c in cls.__mro__ if name in c.__dict__), None)
        if owner is None or not owner.__module__.startswith("mindstore"):
            continue
        member = owner.__dict__[name]
        function = member.fget if isinstance(member, property) else member
        function = getattr(function, "__func__", function)
        if inspect.isfunction(function):
            yield f"{prefix}.{name}", function


def public_verbs() -> dict[str, Callable[..., Any]]:
    verbs: dict[str, Callable[..., Any]] = {}
    for area, cls in SERVICES.items():
        verbs.update(_methods(cls, area))
    formats = importlib.import_module(FORMATS)
    for name in formats.__all__:
        value = getattr(formats, name)
        if inspect.isfunction(value):
            verbs[f"formats.{name}"] = value
        elif name in ("AgentState", "ExecutionState"):
            verbs.update(_methods(value, f"formats.{name}"))
    for module_name, (framework, names) in INTEGRATIONS.items():
        if framework is not None and importlib.util.find_spec(framework) is None:
            continue
        module = importlib.import_module(module_name)
        for name in names:
            value = getattr(module, name)
            short = f"{module_name.removeprefix('mindstore.')}.{name}"
            if inspect.isclass(value):
                verbs.update(_methods(value, short))
            else:
                verbs[short] = value
    return verbs


VERBS = public_verbs()


def _section(doc: str, title: str) -> list[str]:
    """The entry names of a Google-style section (``name: text`` lines one level in)."""
    lines = doc.splitlines()
    try:
        start = lines.index(f"{title}:")
    except ValueError:
        return []
    names = []
    for line in lines[start + 1 :]:
        if line.strip() and not line.startswith(" "):
            break  # the next section (or text) at the docstring's own indent
        match = re.match(r"^    (\*{0,2}\w+)(?: \([^)]*\))?:", line)
        if match:
            names.append(match.group(1).lstrip("*"))
    return names


def test_the_public_verbs_are_the_ones_the_reference_shows() -> None:
    """The enumeration itself: it finds the verbs users call (a broken enumeration would
    pass every check below by checking nothing)."""
    for expected in ("tasks.add_human_message", "tasks.add_assistant_message",
                     "tasks.add_tool_call_part", "tasks.answer_tool_call", "tasks.context",
                     "dialogs.fork", "dialogs.put_text", "analytics.usage", "agents.get",
                     "agent.open", "formats.to_openai_chat", "formats.from_anthropic",
                     "formats.AgentState.set_interrupt", "integrations.task_id_for"):  # fmt: skip
        assert expected in VERBS, expected
    assert len(VERBS) >= 150, len(VERBS)
    print(f"\npublic verbs documented: {len(VERBS)}")


@pytest.mark.parametrize("name", sorted(VERBS))
def test_every_public_verb_documents_itself(name: str) -> None:
    function = VERBS[name]
    doc = inspect.cleandoc(function.__doc__ or "")
    assert doc, f"{name} has no docstring"
    parameters = [
        p.name for p in inspect.signature(function).parameters.values()
        if p.name not in ("self", "cls")
    ]  # fmt: skip
    documented = _section(doc, "Args")
    missing = [p for p in parameters if p not in documented]
    assert not missing, f"{name}: parameters not in its Args section: {missing}"
    unknown = [p for p in documented if p not in parameters]
    assert not unknown, f"{name}: Args names what the signature lacks: {unknown}"
    for error in _section(doc, "Raises"):
        assert hasattr(mindstore.errors, error) or isinstance(
            getattr(builtins, error, None), type
        ), f"{name}: Raises names {error!r}, which is no exception class"


def test_tool_result_verbs_take_real_keywords_in_both_homes() -> None:
    """`answer_tool_call` and `add_tool_result_message` hide nothing behind ``**options``:
    the store's and the in-memory `Task`'s take the same keywords, in the Mind Map's
    positional order."""
    from mindstore.model.specs import TOOL_RESULT_ORDER
    from mindstore.model.task import Task

    for verb in ("answer_tool_call", "add_tool_result_message"):
        for home, skip in ((TaskService, 2), (Task, 1)):
            parameters = list(inspect.signature(getattr(home, verb)).parameters.values())
            kinds = {p.kind for p in parameters}
            assert inspect.Parameter.VAR_POSITIONAL not in kinds, (home, verb)
            assert inspect.Parameter.VAR_KEYWORD not in kinds, (home, verb)
            names = [p.name for p in parameters]
            first = names.index("result") + 1
            assert tuple(names[first : first + len(TOOL_RESULT_ORDER)]) == TOOL_RESULT_ORDER
            assert names[-1] == "id" and parameters[-1].kind is inspect.Parameter.KEYWORD_ONLY
            assert skip  # the store's verbs take the task id first, the Task's do not
