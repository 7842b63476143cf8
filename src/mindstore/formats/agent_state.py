"""The agent-graph layer's execution state, typed: `AgentState` with `ExecutionState`.

An agent graph keeps, next to its messages, where the run is: the current node, the step
count, whether it is running, interrupted (before or after a node, with a reason and
data), completed or failed, and whether a stop was requested. These models hold that state
so it can be stored with a task and loaded back typed; they are pure (no I/O) and mirror
The agent-graph semantics: `clear_interrupt` resumes running, `error` records its message
in `internal_data["error"]`, a dict in the agent graph's own serialised form (with
`_internal_data`) is read by `ExecutionState.from_dict`.

`AgentState.context` holds agent-graph messages as dicts (the format of
`mindstore.formats.agent_graph`); `messages()` converts them to typed mindstore messages.
Subclasses may add application fields, as agent graphs allow; unknown fields are kept.
Enum fields hold their string values (as every stored mindstore model does), so
`state.to_dict()` is ready for a document.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any

from pydantic import Field

from mindstore.errors import ValidationError
from mindstore.model.base import JSON, Model
from mindstore.model.messages import AnyMessage
from mindstore.model.storage_form import bson_size, escape_keys

START = "__start__"
"""The node an agent graph starts from."""


class ExecutionStatus(str, Enum):
    running = "running"
    interrupted_before = "interrupted_before"
    interrupted_after = "interrupted_after"
    completed = "completed"
    error = "error"


class StopRequestStatus(str, Enum):
    none = "none"
    stop_requested = "stop_requested"
    stopped = "stopped"


INTERRUPTED = (ExecutionStatus.interrupted_before, ExecutionStatus.interrupted_after)


class ExecutionState(Model):
    """Progress and interrupt state of one agent-graph run."""

    current_node: str = START
    step: int = Field(default=0, ge=0)
    status: ExecutionStatus = ExecutionStatus.running
    interrupted_node: str | None = None
    interrupt_reason: str | None = None
    interrupt_data: JSON | None = None
    thread_id: str | None = None
    stop_current_execution: StopRequestStatus = StopRequestStatus.none
    internal_data: JSON = Field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ExecutionState:
        """Read the agent graph's serialised form (`_internal_data`) or this model's own.

        Args:
            data: The serialised execution state.

        Returns:
            The `ExecutionState`.

        Raises:
            ValidationError: `data` is not an object, or a field is malformed.
        """
        if not isinstance(data, Mapping):
            raise ValidationError(f"execution state must be an object, got {type(data).__name__}")
        fields = dict(data)
        if "_internal_data" in fields:
            fields["internal_data"] = fields.pop("_internal_data") or {}
        try:
            return cls.model_validate(fields)
        except Exception as exc:  # pydantic's ValidationError
            raise ValidationError(f"invalid execution state: {exc}") from exc

    def set_interrupt(self, node: str, reason: str, status: ExecutionStatus | str,
                      data: JSON | None = None) -> None:  # fmt: skip
        """Pause the run at a node: the status becomes `interrupted_before` or
        `interrupted_after`, with the reason and data kept until `clear_interrupt`.

        Args:
            node: The node the run stopped at.
            reason: Why (e.g. waiting for a person's approval).
            status: `"interrupted_before"` or `"interrupted_after"` the node.
            data: JSON-like data for whoever resumes the run.

        Raises:
            ValidationError: `status` is not an interrupted status.
        """
        known = {member.value for member in ExecutionStatus}
        value = status.value if isinstance(status, ExecutionStatus) else status
        if (
            not isinstance(value, str)
            or value not in known
            or (ExecutionStatus(value) not in INTERRUPTED)
        ):
            raise ValidationError(
                f"status: an interrupt is interrupted_before or interrupted_after, got {value!r}"
            )
        status = ExecutionStatus(value)
        self.interrupted_node, self.interrupt_reason = node, reason
        self.status, self.interrupt_data = status.value, data  # type: ignore[assignment]

    def clear_interrupt(self) -> None:
        """Resume: the interrupt is forgotten and the run is running again."""
        self.interrupted_node = self.interrupt_reason = None
        self.interrupt_data = None
        self.status = ExecutionStatus.running.value  # type: ignore[assignment]

    def is_interrupted(self) -> bool:
        """Is the run paused at an interrupt?

        Returns:
            True while the status is `interrupted_before` or `interrupted_after`.
        """
        return self.status in INTERRUPTED

    def is_running(self) -> bool:
        """Is the run running?

        Returns:
            True while the status is `running`.
        """
        return self.status == ExecutionStatus.running

    def advance_step(self) -> None:
        """Count one more step of the run."""
        self.step += 1

    def set_current_node(self, node: str) -> None:
        """Record the node the run is at.

        Args:
            node: The node's name.
        """
        self.current_node = node

    def complete(self) -> None:
        """Mark the run completed."""
        self.status = ExecutionStatus.completed.value  # type: ignore[assignment]

    def error(self, error_msg: str) -> None:
        """Mark the run failed and keep the error text (`internal_data["error"]`).

        Args:
            error_msg: What went wrong.
        """
        self.status = ExecutionStatus.error.value  # type: ignore[assignment]
        self.internal_data["error"] = error_msg

    def request_stop(self) -> None:
        """Ask the run to stop at its next step (`is_stopped_requested` turns True)."""
        self.stop_current_execution = StopRequestStatus.stop_requested.value  # type: ignore[assignment]

    def is_stopped_requested(self) -> bool:
        """Has someone asked the run to stop?

        Returns:
            True after `request_stop`.
        """
        return self.stop_current_execution == StopRequestStatus.stop_requested


class AgentState(Model):
    """Messages, their running summary and the execution state of an agent graph."""

    context: list[JSON] = Field(default_factory=list)
    context_summary: str | None = None
    execution_meta: ExecutionState = Field(default_factory=ExecutionState)

    def messages(self) -> list[AnyMessage]:
        """The context as typed mindstore messages (ids, usage and tool calls kept)."""
        from mindstore.formats.agent_graph import from_agent_graph

        return from_agent_graph(self.context)

    # The agent graph's own delegating API, so code written against it reads the same.
    def set_interrupt(self, node: str, reason: str, status: ExecutionStatus | str,
                      data: JSON | None = None) -> None:  # fmt: skip
        """Pause the run at a node: the status becomes `interrupted_before` or
        `interrupted_after`, with the reason and data kept until `clear_interrupt`.

        Args:
            node: The node the run stopped at.
            reason: Why (e.g. waiting for a person's approval).
            status: `"interrupted_before"` or `"interrupted_after"` the node.
            data: JSON-like data for whoever resumes the run.

        Raises:
            ValidationError: `status` is not an interrupted status.
        """
        self.execution_meta.set_interrupt(node, reason, status, data)

    def clear_interrupt(self) -> None:
        """Resume: the interrupt is forgotten and the run is running again."""
        self.execution_meta.clear_interrupt()

    def is_running(self) -> bool:
        """Is the run running?

        Returns:
            True while the status is `running`.
        """
        return self.execution_meta.is_running()

    def is_interrupted(self) -> bool:
        """Is the run paused at an interrupt?

        Returns:
            True while the status is `interrupted_before` or `interrupted_after`.
        """
        return self.execution_meta.is_interrupted()

    def advance_step(self) -> None:
        """Count one more step of the run."""
        self.execution_meta.advance_step()

    def set_current_node(self, node: str) -> None:
        """Record the node the run is at.

        Args:
            node: The node's name.
        """
        self.execution_meta.set_current_node(node)

    def complete(self) -> None:
        """Mark the run completed."""
        self.execution_meta.complete()

    def error(self, error_msg: str) -> None:
        """Mark the run failed and keep the error text (`internal_data["error"]`).

        Args:
            error_msg: What went wrong.
        """
        self.execution_meta.error(error_msg)

    def is_stopped_requested(self) -> bool:
        """Has someone asked the run to stop?

        Returns:
            True after `request_stop`.
        """
        return self.execution_meta.is_stopped_requested()


MAX_AGENT_STATE_BYTES = 1 << 20
"""A stored agent state's limit: it shares the task document with the open messages, and
the writer's size checks count only the messages."""


def agent_state_document(state: Any) -> JSON:
    """The stored form of an agent-graph state (keys escaped), or `ValidationError`
    naming `state`: not that model, not storable, or over `MAX_AGENT_STATE_BYTES`."""
    if not isinstance(state, AgentState):
        raise ValidationError(
            f"state must be a mindstore.formats.agent_state.AgentState, got {type(state).__name__}"
        )
    try:
        document: JSON = escape_keys(AgentState.model_validate(state.to_dict()).to_dict())
        size = bson_size(document)
    except Exception as exc:  # pydantic's or bson's assorted errors
        raise ValidationError(f"state cannot be stored: {str(exc)[:200]}") from None
    if size > MAX_AGENT_STATE_BYTES:
        raise ValidationError(f"state is {size} bytes stored, over {MAX_AGENT_STATE_BYTES}")
    return document
