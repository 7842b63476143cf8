"""Pure planners, in one import: what a verb writes, decided from the task header alone.

The planning core (`core`: `Plan`, `Planner`, checks, stored forms) and the verbs
(`messages`, `subtasks`, `parts`; `redaction` apart) live in their own modules; this
package re-exports them so one import reaches every planner:
`from mindstore.model import plans`.
"""

from __future__ import annotations

from mindstore.model.lean_form import (
    ABSENT,
    fill_task_ids,
    full_stored_doc,
    stored_doc,
)
from mindstore.model.plans.agent_step import plan_agent_step
from mindstore.model.plans.core import (
    FROM_VALUE,
    USAGE_COUNTS,
    DocTransform,
    Patch,
    Plan,
    Planner,
    check_id,
    check_message_id,
    check_message_values,
    choose_trigger,
    derive_header,
    message_usage,
    parse_stored,
    resolve_ts,
    typed_errors,
)
from mindstore.model.plans.messages import (
    answer_call,
    build_human_message,
    build_tool_result_message,
    check_compression_marker,
    compression_ids,
    plan_add_assistant_message,
    plan_add_compression_message,
    plan_add_human_message,
    plan_add_informational_message,
    plan_add_message,
    plan_add_messages,
    plan_add_system_message,
    plan_add_task_config,
    plan_add_tool_result_message,
    plan_answer_tool_call,
)
from mindstore.model.plans.parts import (
    plan_add_reasoning_part,
    plan_add_text_part,
    plan_add_tool_call_part,
    plan_finish_assistant_message,
)
from mindstore.model.plans.subtasks import (
    find_exit_trigger,
    plan_add_task_entry,
    plan_add_task_exit,
)
from mindstore.model.storage_form import DERIVED_KEY

__all__ = [
    "ABSENT",
    "DERIVED_KEY",
    "FROM_VALUE",
    "USAGE_COUNTS",
    "DocTransform",
    "Patch",
    "Plan",
    "Planner",
    "answer_call",
    "build_human_message",
    "build_tool_result_message",
    "check_compression_marker",
    "check_id",
    "check_message_id",
    "check_message_values",
    "choose_trigger",
    "compression_ids",
    "derive_header",
    "fill_task_ids",
    "find_exit_trigger",
    "full_stored_doc",
    "message_usage",
    "parse_stored",
    "plan_add_assistant_message",
    "plan_add_compression_message",
    "plan_add_human_message",
    "plan_add_informational_message",
    "plan_add_message",
    "plan_add_messages",
    "plan_add_reasoning_part",
    "plan_add_system_message",
    "plan_add_task_config",
    "plan_add_task_entry",
    "plan_add_task_exit",
    "plan_add_text_part",
    "plan_add_tool_call_part",
    "plan_add_tool_result_message",
    "plan_agent_step",
    "plan_answer_tool_call",
    "plan_finish_assistant_message",
    "resolve_ts",
    "stored_doc",
    "typed_errors",
]
