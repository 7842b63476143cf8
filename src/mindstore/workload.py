"""A realistic, seeded multi-tenant workload: what `mindstore demo-data` loads.

Operators want to try every analytics report on data that looks like production: several
tenants and owners, several models, assistant turns with (and sometimes without) usage,
tool calls that sometimes fail (an `is_error` result or an `error` part), nested sub-tasks
(some left open), tasks in every state, and forks whose copied prefix must not be counted
twice. The conversations are built with the in-memory `Task` verbs, so they carry exactly
the header, scopes and timestamps the store would have written, and are then inserted as
whole documents: generating 100,000 messages takes seconds instead of 100,000 updates.

Generation is deterministic for a given `WorkloadSpec` (ids and clock are swapped for
seeded ones while it runs), so a test, a benchmark and a CLI user see the same data.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from mindstore.collection_names import DIALOG_NODES, TASKS
from mindstore.model import base
from mindstore.model.dialog import DialogNode, child_node, fork_copies, kept_indexes
from mindstore.model.header import TaskState
from mindstore.model.messages import ToolMessage, Usage, UsageCost
from mindstore.model.parts import (
    ErrorPart,
    TaskConfigPart,
    TextPart,
    ToolCallPart,
    ToolMetadata,
    ToolResultPart,
)
from mindstore.model.task import Task
from mindstore.protocols import HasDatabase
from mindstore.stored_documents import node_document, task_document
from mindstore.workload_text import SCRIPTS, Script

MODELS: tuple[str, ...] = (
    "openai/gpt-4o",
    "openai/gpt-4o-mini",
    "anthropic/claude-sonnet-4",
    "google/gemini-2.5-pro",
)
TOOLS: tuple[str, ...] = ("web_search", "fetch_page", "python", "calendar")
DELEGATE_TOOL = "research"
"""The task-entry tool: calling it opens a nested sub-task."""

# (input, output) dollars per million tokens: plausible list prices, for realistic costs.
PRICES: dict[str, tuple[float, float]] = {
    "openai/gpt-4o": (2.5, 10.0),
    "openai/gpt-4o-mini": (0.15, 0.6),
    "anthropic/claude-sonnet-4": (3.0, 15.0),
    "google/gemini-2.5-pro": (1.25, 10.0),
}

ProgressFn = Callable[[str, int, int | None], None]


@dataclass(frozen=True)
class WorkloadSpec:
    """How much data to make, and its shape."""

    tenants: int = 3
    owners_per_tenant: int = 4
    tasks: int = 60
    mean_messages: int = 40
    """Average messages per (non-fork) task; each task draws its own length around it."""
    days: int = 28
    start: datetime = datetime(2026, 10, 1, tzinfo=UTC)
    fork_every: int = 10
    """Every n-th task gets a fork that keeps its first message and last few (0: none)."""
    tool_error_rate: float = 0.12
    missing_usage_rate: float = 0.08
    seed: int = 1

    def tenant_names(self) -> list[str]:
        return [f"tenant-{i}" for i in range(self.tenants)]

    def owner_names(self, tenant: str) -> list[str]:
        return [f"{tenant}-user-{i}" for i in range(self.owners_per_tenant)]


@dataclass
class Workload:
    """Stored documents, ready to insert: tasks (forks included) and dialog nodes."""

    tasks: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def message_count(self) -> int:
        return sum(len(task["messages"]) for task in self.tasks)


@contextmanager
def _seeded_ids_and_clock(rng: random.Random, clock: list[float]) -> Iterator[None]:
    """Deterministic ids and a simulated clock for the model layer, restored afterwards."""
    saved = base.ID_SOURCE, base.CLOCK
    base.ID_SOURCE = lambda: "".join(rng.choice(base.ID_ALPHABET) for _ in range(21))
    base.CLOCK = lambda: clock[0]
    try:
        yield
    finally:
        base.ID_SOURCE, base.CLOCK = saved


class _Conversation:
    """Drives one in-memory task through turns, advancing a simulated clock."""

    def __init__(
        self,
        task: Task,
        rng: random.Random,
        spec: WorkloadSpec,
        clock: list[float],
        script: Script | None = None,
    ) -> None:
        self.task = task
        self.rng = rng
        self.spec = spec
        self.clock = clock
        self.calls = 0
        self.stalled = False
        """A sub-task was left running: the conversation stops there, as a live one would."""
        self.script = script or rng.choice(SCRIPTS)
        """What this conversation is about (a trip, a support case, a coding session)."""
        self.user_turns = 0
        self.replies = 0

    def tick(self, low: float, high: float) -> int:
        self.clock[0] += self.rng.uniform(low, high)
        return int(self.clock[0])

    def model(self) -> str:
        return self.task.header.current_model_name() or MODELS[0]

    def assistant_turn(self, tool: str | None) -> ToolCallPart | None:
        """One assistant message: text, maybe a tool call, then usage and finish time."""
        message = self.task.add_assistant_message(timestamp=self.tick(1, 20))
        self.task.add_text_part(message.id, self.script.reply(self.replies))
        self.replies += 1
        call = None
        if tool is not None:
            self.calls += 1
            query = self.script.query(tool, self.rng)
            call = ToolCallPart(tool_call_id=f"{self.task.id}-c{self.calls}", tool_name=tool,
                                args={"query": query}, is_loading=False)  # fmt: skip
            self.task.add_tool_call_part(message.id, call)
        latency = max(1, int(self.rng.lognormvariate(1.6, 0.7)))
        finished = int(message.started_ts) + latency
        self.clock[0] = max(self.clock[0], finished)
        self.task.finish_assistant_message(message.id, finished_ts=finished, **self.usage())
        return call

    def usage(self) -> dict[str, Any]:
        """Mind Map usage fields, the message-layer `Usage` object, or none at all."""
        roll = self.rng.random()
        if roll < self.spec.missing_usage_rate:
            return {}
        tokens_in, tokens_out = self.rng.randint(200, 6000), self.rng.randint(20, 900)
        cache_reads = self.rng.choice((0, 0, self.rng.randint(100, tokens_in)))
        price_in, price_out = PRICES.get(self.model(), (1.0, 4.0))
        cost = round((tokens_in * price_in + tokens_out * price_out) / 1e6, 6)
        if roll < 0.3:
            return {"usage": Usage(input_tokens=tokens_in, output_tokens=tokens_out,
                                   cache_read_tokens=cache_reads,
                                   cache_write_tokens=self.rng.choice((0, 64)),
                                   cost=UsageCost(total=cost))}  # fmt: skip
        return {"tokens_in": tokens_in, "tokens_out": tokens_out, "cache_reads": cache_reads,
                "cache_writes": 0, "cost": cost}  # fmt: skip

    def answer(self, call: ToolCallPart) -> None:
        """The tool's result: success, an `is_error` result, or a result with an error part."""
        ts = self.tick(0.5, 15)
        roll = self.rng.random()
        if roll < self.spec.tool_error_rate / 2:
            self.task.answer_tool_call(call.tool_call_id, {"error": "timeout"}, is_error=True,
                                       error_message="tool timed out", timestamp=ts)  # fmt: skip
        elif roll < self.spec.tool_error_rate:
            result = ToolResultPart(tool_call_id=call.tool_call_id, tool_name=call.tool_name,
                                    result={"partial": True})  # fmt: skip
            error = ErrorPart(message="rate limited", code="429")
            self.task.add_message(
                ToolMessage(started_ts=ts, finished_ts=ts, content=[result, error])
            )
        else:
            self.task.answer_tool_call(call.tool_call_id, {"hits": self.script.result(self.rng)},
                                       timestamp=ts)  # fmt: skip

    def turn(self, depth: int, allow_subtask: bool) -> None:
        """A user question, then assistant/tool rounds, maybe a delegated sub-task."""
        if depth == 0:
            text = self.script.user(self.user_turns, self.rng)
            self.user_turns += 1
            self.task.add_human_message(text, timestamp=self.tick(30, 900))
        for _ in range(self.rng.choice((0, 1, 1, 2))):
            call = self.assistant_turn(self.rng.choice(TOOLS))
            if call is not None:
                self.answer(call)
        if allow_subtask and depth < 2 and self.rng.random() < 0.25:
            self.sub_task(depth)
        if not self.stalled:
            self.assistant_turn(None)

    def sub_task(self, depth: int) -> None:
        """Delegate: a research call, a nested level with its own model, usually an exit."""
        self.assistant_turn(DELEGATE_TOOL)
        config = task_config(self.rng.choice(MODELS))
        self.task.add_task_entry(
            [TextPart(text=self.script.delegation(self.rng))], config, timestamp=self.tick(1, 3)
        )
        for _ in range(self.rng.randint(1, 3)):
            if not self.stalled:
                self.turn(depth + 1, allow_subtask=True)
        if self.stalled or self.rng.random() < 0.08:
            self.stalled = True  # still running: no exit yet
            return
        self.task.add_task_exit(
            [TextPart(text=self.script.report(self.rng))], timestamp=self.tick(1, 5)
        )


def task_config(model: str) -> TaskConfigPart:
    tools = [ToolMetadata(name=name) for name in TOOLS]
    tools.append(
        ToolMetadata(name=DELEGATE_TOOL, description="Delegate a sub-task", is_task_entry=True)
    )
    return TaskConfigPart(model_name=model, tool_metadata=tools)


def _conversation(task: Task, rng: random.Random, spec: WorkloadSpec, clock: list[float],
                  length: int) -> _Conversation:  # fmt: skip
    conversation = _Conversation(task, rng, spec, clock)
    while len(task.messages) < length and not conversation.stalled:
        conversation.turn(0, allow_subtask=True)
    return conversation


def _state(rng: random.Random, task: Task) -> TaskState:
    if task.header.scope_stack:
        return TaskState.running
    return rng.choices(
        (TaskState.completed, TaskState.running, TaskState.failed, TaskState.paused),
        weights=(70, 18, 7, 5),
    )[0]


def _document(task: Task, tenant: str, owner: str, title: str, state: TaskState) -> dict[str, Any]:
    task.state = state
    first, last = task.messages[0].started_ts, task.messages[-1].started_ts
    document = task_document(task, tenant, owner=owner, title=title, created_at=_when(first),
                             updated_at=_when(max(first, last)))  # fmt: skip
    document["state"] = state.value
    return document


def _when(ts: float) -> datetime:
    return datetime.fromtimestamp(int(ts), tz=UTC)


def generate(spec: WorkloadSpec = WorkloadSpec(), progress: ProgressFn | None = None) -> Workload:
    """Build the workload in memory (deterministic for a given spec)."""
    rng = random.Random(spec.seed)
    clock = [spec.start.timestamp()]
    workload = Workload()
    span = spec.days * 86400
    with _seeded_ids_and_clock(random.Random(spec.seed + 1), clock):
        for index in range(spec.tasks):
            tenant = spec.tenant_names()[index % spec.tenants]
            owner = rng.choice(spec.owner_names(tenant))
            clock[0] = spec.start.timestamp() + rng.uniform(0, span * 0.9)
            task = Task(id=base.new_id())
            model = rng.choice(MODELS)
            task.add_task_config(task_config(model), timestamp=int(clock[0]))
            length = max(4, int(rng.gauss(spec.mean_messages, spec.mean_messages / 3)))
            script = _conversation(task, rng, spec, clock, length).script
            title = script.title
            workload.tasks.append(_document(task, tenant, owner, title, _state(rng, task)))
            if spec.fork_every and index % spec.fork_every == spec.fork_every - 1:
                _add_fork(workload, task, tenant, owner, title, rng, spec, clock, script)
            if progress is not None:
                progress("generating", index + 1, spec.tasks)
    return workload


def _add_fork(workload: Workload, parent: Task, tenant: str, owner: str, title: str,
              rng: random.Random, spec: WorkloadSpec, clock: list[float],
              script: Script) -> None:  # fmt: skip
    """A child dialog keeping the first message and the last few, then going on by itself
    (about the same thing)."""
    root = DialogNode(dialog_id=parent.id, owner=owner, root_id=parent.id)
    indexes = kept_indexes(len(parent.messages), last_n=6, first_k=1)
    child_id = base.new_id()
    copies = fork_copies(parent.id, child_id, parent.messages, indexes)
    child = Task(id=child_id, messages=copies)
    node = child_node(root, child_id, owner, len(copies), 6, 1, None)
    clock[0] += rng.uniform(60, 3600)
    fork_started = clock[0]
    conversation = _Conversation(child, rng, spec, clock, script)
    for _ in range(rng.randint(1, 3)):
        conversation.turn(0, allow_subtask=False)
    document = _document(child, tenant, owner, title, TaskState.completed)
    document["created_at"] = _when(fork_started)
    workload.tasks.append(document)
    workload.nodes.append(node_document(root, tenant, _when(parent.messages[0].started_ts)))
    workload.nodes.append(node_document(node, tenant, _when(fork_started)))


async def load(store: HasDatabase, workload: Workload, progress: ProgressFn | None = None,
               batch: int = 100) -> None:  # fmt: skip
    """Insert the workload's documents (`insert_many` in batches)."""
    database = store.database
    total = len(workload.tasks)
    for start in range(0, total, batch):
        await database[TASKS].insert_many(workload.tasks[start : start + batch])
        if progress is not None:
            progress("inserting", min(total, start + batch), total)
    if workload.nodes:
        await database[DIALOG_NODES].insert_many(workload.nodes)
