"""The task repository is composed, not stacked: a guard on its shape.

`acme.tasks` was one chain of eight classes, and the context window called the
repository's private helpers. Now the parts (scope, sealed pages, port, writer, reads,
retraction, content lifecycle) are separate objects with public surfaces
(docs/architecture.md, "The task repository"). These tests keep it so: no class chain
deeper than two, and no module of the repository, the service or the window reads
reaching a private name on another object.
"""

from __future__ import annotations

import re
from pathlib import Path

import mindstore
from mindstore.repositories.content_lifecycle import ContentLifecycle
from mindstore.repositories.engine import TaskWriter
from mindstore.repositories.pages import SealedPages
from mindstore.repositories.port import TaskPort
from mindstore.repositories.retraction import Retraction
from mindstore.repositories.scope import TaskScope
from mindstore.repositories.task_reads import TaskReads
from mindstore.repositories.tasks import TaskRepository
from mindstore.services.tasks import TaskService

SOURCE = Path(mindstore.__file__).parent
MODULES = [
    "repositories/scope.py",
    "repositories/pages.py",
    "repositories/port.py",
    "repositories/engine.py",
    "repositories/task_reads.py",
    "repositories/message_reads.py",
    "repositories/task_lifecycle.py",
    "repositories/agent_states.py",
    "repositories/dialogs.py",
    "repositories/dialog_nodes.py",
    "repositories/dialog_repair.py",
    "repositories/dialog_transfer.py",
    "repositories/dialog_prompts.py",
    "repositories/retraction.py",
    "repositories/content_lifecycle.py",
    "repositories/tasks.py",
    "repositories/streaming.py",
    "services/tasks.py",
    "compression/level_read.py",
    "compression/paged_level_read.py",
    "compression/context.py",
]
PRIVATE_USE = re.compile(r"\b((?:[A-Za-z_][A-Za-z0-9_]*\.)+)(_[a-z][a-z0-9_]*)")
ALLOWED = {
    # a MongoDB field path inside a change-stream filter, not an attribute
    ("repositories/content_lifecycle.py", "documentKey._id"),
    # the in-memory Task's cached header, filled by `load` so it is not derived again
    ("repositories/task_reads.py", "task._header"),
}


def _depth(cls: type) -> int:
    """How many classes deep `cls` is, itself included (object and typing bases aside)."""
    return len([c for c in cls.__mro__ if c.__module__.startswith("mindstore")])


def test_no_class_chain_is_deeper_than_two() -> None:
    assert _depth(TaskService) == 2
    assert TaskService.__bases__ == (TaskRepository,)
    for part in (TaskScope, SealedPages, TaskPort, TaskWriter, TaskReads, Retraction,
                 ContentLifecycle, TaskRepository):  # fmt: skip
        assert _depth(part) == 1, part


def test_no_module_reaches_into_another_objects_private_names() -> None:
    found = []
    for module in MODULES:
        for number, line in enumerate((SOURCE / module).read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            for match in PRIVATE_USE.finditer(code):
                owner, name = match.group(1), match.group(2)
                if owner in ("self.", "cls.") or (module, owner + name) in ALLOWED:
                    continue
                found.append(f"{module}:{number}: {owner}{name}")
    assert found == []


def test_the_private_use_scan_finds_one() -> None:
    """The scan above would see a use like the ones it replaced (it is not vacuous)."""
    line = "    rows = await tasks._aggregate_task(task_id, build)"
    assert [m.group(0) for m in PRIVATE_USE.finditer(line)] == ["tasks._aggregate_task"]
    assert [m.group(1) for m in PRIVATE_USE.finditer("self._tasks.find_one(q)")] == ["self."]
