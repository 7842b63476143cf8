"""Each verb is declared once (`mindstore.model.verbs`) and both homes show it whole.

* At run time: the in-memory `Task`'s method and the store's (`acme.tasks`) have the stub's
  parameters (the store's after `task_id`), its docstring and its result type, so `help()`,
  `inspect.signature` and the API reference show the real verb, not `*args, **kwargs`.
* For a type checker: `mypy --strict` on a user's code sees the same signatures: the right
  calls pass with their precise result types, a misspelt keyword or a wrong type is an
  error (the check a user's IDE makes).
"""

from __future__ import annotations

import inspect
import os
import pydoc
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import mindstore
from mindstore.errors import ValidationError
from mindstore.model import verbs
from mindstore.model.task import Task
from mindstore.services.tasks import TaskService

DECLARED: dict[str, Callable[..., Any]] = {
    name: stub
    for name, stub in vars(verbs).items()
    if inspect.isfunction(stub) and not name.startswith("_")
    and str(inspect.signature(stub).return_annotation).startswith("Step[")
}  # fmt: skip
PART_VERBS_OR_FALSE = {"add_text_part", "add_reasoning_part", "add_tool_call_part"}


def test_the_declarations_are_the_verbs() -> None:
    assert len(DECLARED) == 16, sorted(DECLARED)
    assert {"add_human_message", "answer_tool_call", "add_task_exit",
            "finish_assistant_message"} <= DECLARED.keys()  # fmt: skip


@pytest.mark.parametrize("name", sorted(DECLARED))
def test_both_homes_show_the_declared_signature_and_docstring(name: str) -> None:
    stub = DECLARED[name]
    declared = list(inspect.signature(stub).parameters.values())
    memory = list(inspect.signature(getattr(Task, name)).parameters.values())
    store = list(inspect.signature(getattr(TaskService, name)).parameters.values())
    assert [p.name for p in memory[:1]] == ["self"]
    assert [(p.name, p.kind) for p in store[:2]] == [
        ("self", inspect.Parameter.POSITIONAL_ONLY),
        ("task_id", inspect.Parameter.POSITIONAL_ONLY),
    ]
    assert memory[1:] == declared and store[2:] == declared
    assert not {p.kind for p in declared} & {inspect.Parameter.VAR_POSITIONAL,
                                              inspect.Parameter.VAR_KEYWORD}  # fmt: skip
    result = str(inspect.signature(stub).return_annotation)[len("Step[") : -1]
    assert inspect.signature(getattr(TaskService, name)).return_annotation == result
    expected = "bool" if name in PART_VERBS_OR_FALSE else result
    assert inspect.signature(getattr(Task, name)).return_annotation == expected
    summary = inspect.cleandoc(stub.__doc__ or "").splitlines()[0]
    for home in (Task, TaskService):
        method = getattr(home, name)
        assert method.__name__ == name and inspect.iscoroutinefunction(method) == (
            home is TaskService
        )
        text = pydoc.render_doc(method, renderer=pydoc.plaintext)
        assert summary in text
        for parameter in declared:
            assert re.search(rf"\b{parameter.name}\b", text.split("\n\n")[1]), (home, parameter)
    assert "    task_id: The task." in (getattr(TaskService, name).__doc__ or "")
    assert "task_id:" not in (getattr(Task, name).__doc__ or "")


async def test_a_wrong_keyword_is_refused_in_both_homes(store: Any) -> None:
    acme = store.scoped("acme")
    tid = (await acme.tasks.create()).id
    with pytest.raises(TypeError, match="mesage_id"):
        await acme.tasks.add_human_message(tid, "hi", mesage_id="u1")
    with pytest.raises(TypeError, match="mesage_id"):
        Task().add_human_message("hi", mesage_id="u1")
    assert await acme.tasks.messages(tid) == []


async def test_a_part_verb_without_a_message_id_is_refused_in_both_homes(store: Any) -> None:
    """A part verb's message id is checked in its declaration: never taken for an append."""
    acme = store.scoped("acme")
    tid = (await acme.tasks.create()).id
    for bad in (None, "", 3):
        with pytest.raises(ValidationError, match="message id"):
            await acme.tasks.add_text_part(tid, bad, "text")
        with pytest.raises(ValidationError, match="message id"):
            await acme.tasks.finish_assistant_message(tid, bad)
        assert Task().add_text_part(bad, "text") is False
        with pytest.raises(ValidationError, match="message id"):
            Task().finish_assistant_message(bad)
    assert await acme.tasks.messages(tid) == []


SNIPPET = """
import mindstore
from mindstore import Task
from mindstore.model.messages import AnyMessage, AssistantMessage, ToolMessage, UserMessage


async def main() -> None:
    store = await mindstore.connect()
    acme = store.scoped("acme")
    tid = (await acme.tasks.create()).id
    user: UserMessage | None = await acme.tasks.add_human_message(tid, "hi", message_id="u1")
    reply: AssistantMessage = await acme.tasks.add_assistant_message(tid, id="a1")
    updated: AssistantMessage = await acme.tasks.finish_assistant_message(tid, "a1", tokens_in=3)
    answer: ToolMessage = await acme.tasks.answer_tool_call(tid, "c1", {"ok": 1}, is_error=True)
    pair = await acme.tasks.add_task_exit(tid, [], payloadKey="r")
    stored: list[AnyMessage] = await acme.tasks.add_messages(tid, [])
    task = Task()
    kept: UserMessage | None = task.add_human_message("hi", message_id="u1")
    added: bool = task.add_text_part("a1", "text")
    await acme.tasks.add_human_message(tid, "hi", mesage_id="u1")  # E: call-arg
    await acme.tasks.add_human_message(tid, 3)  # E: arg-type
    await acme.tasks.add_human_message("hi", message_id="u1", task_id=tid)  # E: call-arg
    task.add_human_message(tid, "hi")  # E: arg-type
    wrong: ToolMessage = await acme.tasks.add_human_message(tid, "hi")  # E: assignment
    flag: str = task.add_text_part("a1", "t")  # E: assignment
    task.answer_tool_call("c1", {}, is_eror=True)  # E: call-arg
    print(user, reply, updated, answer, pair, stored, kept, added, wrong, flag)
"""


def test_mypy_strict_sees_the_real_signatures(monkeypatch: pytest.MonkeyPatch) -> None:
    """A user's `mypy --strict` (and so their IDE) checks calls against the declared
    signatures in both homes: the calls above without a mark pass, each marked one fails
    with its code, and nothing else does."""
    api = pytest.importorskip("mypy.api")
    source = Path(mindstore.__file__).resolve().parent.parent  # the sources under test
    monkeypatch.setenv("MYPYPATH", str(source))
    monkeypatch.chdir(source.parent)  # the project's mypy cache (warm after `mypy src`)
    stdout, stderr, _status = api.run([
        "--strict", "--show-error-codes", "--no-error-summary", "--no-pretty",
        "--follow-imports=silent", "--config-file", os.devnull, "-c", SNIPPET,
    ])  # fmt: skip
    found = set()
    for line in stdout.splitlines():
        match = re.match(r"<string>:(\d+): error: .*\[([\w-]+)\]$", line)
        assert match, f"unexpected mypy output: {line}\n{stderr}"
        found.add((int(match.group(1)), match.group(2)))
    expected = {
        (number, mark.group(1))
        for number, text in enumerate(SNIPPET.splitlines(), start=1)
        if (mark := re.search(r"# E: ([\w-]+)$", text))
    }
    assert len(expected) == 7
    assert found == expected, stdout
