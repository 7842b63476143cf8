"""An agent-graph step: its messages appended and task-document fields set beside them
(`tasks.save_agent_state`), in one plan, so both land in one guarded update (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mindstore.model.base import JSON
from mindstore.model.header import TaskHeader
from mindstore.model.messages import AnyMessage
from mindstore.model.plans.core import Plan
from mindstore.model.plans.messages import plan_add_messages

__all__ = ["plan_agent_step"]


def plan_agent_step(
    header: TaskHeader, task_id: str, messages: Sequence[AnyMessage], fields: JSON, **kw: Any
) -> Plan:
    """The step's messages appended and `fields` set beside them, one plan (pure)."""
    plan: Plan = plan_add_messages(header, task_id, messages, **kw)
    plan.document_set = fields
    return plan
