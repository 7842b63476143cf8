"""The message formats agent code already holds, converted to and from mindstore messages.

Each format is a pure `to_...(messages)` / `from_...(payload)` pair (no I/O):

* `to_openai_chat` / `from_openai_chat`: OpenAI Chat Completions `messages`;
* `to_responses` / `from_responses`: OpenAI Responses input items;
* `to_anthropic` / `from_anthropic`: Anthropic Messages `{"system": ..., "messages": [...]}`;
* `to_gemini` / `from_gemini`: Gemini `{"system_instruction": ..., "contents": [...]}`;
* `to_message_layer` / `from_message_layer`: the message-layer format (`TextContent`,
  `ToolCallContent`, `ThinkingContent`; `custom`, `branch_summary`, `compaction_summary`);
* `to_agent_graph` / `from_agent_graph`: the agent-graph format (content blocks,
  `message_id`, `TokenUsages`), with its `AgentState` / `ExecutionState` in
  `mindstore.formats.agent_state`.

Imports give typed messages ready for `tasks.add_messages`: tool calls are `ToolCallPart`s
answered by `ToolMessage`s (so the store tracks them), usage sits on the message, ids are
kept where the format has them. What a format says beyond the typed model is kept in the
message's `metadata` under the format's name, so `to_x(from_x(p)) == p`. The provider
exports send only what a model must see (see `mindstore.formats.conversation`).
"""

from mindstore.formats.agent_graph import from_agent_graph, to_agent_graph
from mindstore.formats.agent_state import (
    AgentState,
    ExecutionState,
    ExecutionStatus,
    StopRequestStatus,
)
from mindstore.formats.anthropic import from_anthropic, to_anthropic
from mindstore.formats.gemini import from_gemini, to_gemini
from mindstore.formats.message_layer import from_message_layer, to_message_layer
from mindstore.formats.openai_chat import from_openai_chat, to_openai_chat
from mindstore.formats.responses import from_responses, to_responses

__all__ = [
    "AgentState",
    "ExecutionState",
    "ExecutionStatus",
    "StopRequestStatus",
    "from_agent_graph",
    "from_anthropic",
    "from_gemini",
    "from_message_layer",
    "from_openai_chat",
    "from_responses",
    "to_agent_graph",
    "to_anthropic",
    "to_gemini",
    "to_message_layer",
    "to_openai_chat",
    "to_responses",
]
