"""The agent-graph execution state: transitions, its serialised forms, refusals."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mindstore.errors import ValidationError
from mindstore.formats import AgentState, ExecutionState, ExecutionStatus, StopRequestStatus
from mindstore.formats.agent_state import START
from mindstore.model.messages import AssistantMessage, UserMessage


def test_a_run_goes_through_its_states() -> None:
    state = AgentState()
    assert state.execution_meta.current_node == START and state.is_running()
    state.set_current_node("plan")
    state.advance_step()
    state.set_interrupt("plan", "needs approval", "interrupted_before", {"tool": "rm"})
    meta = state.execution_meta
    assert state.is_interrupted() and not state.is_running()
    assert (meta.interrupted_node, meta.interrupt_reason, meta.interrupt_data) == (
        "plan",
        "needs approval",
        {"tool": "rm"},
    )
    state.clear_interrupt()
    assert (
        state.is_running()
        and meta.interrupted_node is meta.interrupt_reason is meta.interrupt_data is None
    )
    meta.request_stop()
    assert state.is_stopped_requested()
    state.error("tool crashed")
    assert meta.status == "error" and meta.internal_data == {"error": "tool crashed"}
    state.complete()
    assert meta.status == ExecutionStatus.completed and meta.step == 1


def test_an_interrupt_needs_an_interrupted_status() -> None:
    state = ExecutionState(current_node="n")
    with pytest.raises(ValidationError, match="status"):
        state.set_interrupt("n", "why", "completed")
    with pytest.raises(ValueError):
        state.set_interrupt("n", "why", "sleeping")
    assert state.status == "running" and state.interrupted_node is None


def test_the_agent_graph_serialised_form_is_read() -> None:
    meta = ExecutionState.from_dict(
        {
            "current_node": "act",
            "step": 3,
            "status": "interrupted_after",
            "_internal_data": {"k": 1},
            "thread_id": "t-1",
        }
    )
    assert (meta.current_node, meta.step, meta.is_interrupted(), meta.internal_data) == (
        "act",
        3,
        True,
        {"k": 1},
    )
    for bad in (
        {"current_node": "x", "step": -1},
        {"current_node": "x", "status": "paused"},
        ["not", "a", "dict"],
    ):
        with pytest.raises(ValidationError):
            ExecutionState.from_dict(bad)  # type: ignore[arg-type]


def test_context_converts_to_typed_messages_and_subclasses_keep_their_fields() -> None:
    class TripState(AgentState):
        city: str = "Oslo"

    state = TripState(
        context=[
            {"message_id": "u1", "role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"message_id": "a1", "role": "assistant", "content": [{"type": "text", "text": "yo"}]},
        ]
    )
    user, assistant = state.messages()
    assert (
        isinstance(user, UserMessage)
        and isinstance(assistant, AssistantMessage)
        and assistant.id == "a1"
    )
    assert TripState.model_validate(state.to_dict()).city == "Oslo"


operations = st.lists(
    st.sampled_from(["advance", "node", "interrupt", "clear", "stop", "error", "complete"]),
    max_size=12,
)


@settings(max_examples=100, deadline=None)
@given(ops=operations, node=st.text(min_size=1, max_size=8))
def test_any_state_survives_its_stored_form(ops: list[str], node: str) -> None:
    state = AgentState()
    for op in ops:
        {
            "advance": state.advance_step,
            "node": lambda: state.set_current_node(node),
            "interrupt": lambda: state.set_interrupt(node, "r", "interrupted_after", {"n": 1}),
            "clear": state.clear_interrupt,
            "stop": state.execution_meta.request_stop,
            "error": lambda: state.error("e"),
            "complete": state.complete,
        }[op]()
    stored: dict[str, Any] = state.to_dict()
    assert isinstance(stored["execution_meta"]["status"], str)  # BSON-ready: plain values
    assert stored["execution_meta"]["stop_current_execution"] in {
        s.value for s in StopRequestStatus
    }
    again = AgentState.model_validate(stored)
    assert again == state and again.is_interrupted() == state.is_interrupted()
    assert again.execution_meta.step == ops.count("advance")


@pytest.mark.parametrize("status", ["nope", "running", 3, None, {"$gt": ""}, ["x"]])
def test_an_interrupt_with_a_status_that_is_not_one_is_a_typed_error(status: object) -> None:
    from mindstore.errors import ValidationError
    from mindstore.formats.agent_state import ExecutionState

    state = ExecutionState()
    before = state.model_dump()
    with pytest.raises(ValidationError, match="status"):
        state.set_interrupt("node", "reason", status)  # type: ignore[arg-type]
    assert state.model_dump() == before
    state.set_interrupt("node", "reason", "interrupted_after")
    assert state.status == "interrupted_after" and state.interrupted_node == "node"
