"""What each role may hold, checked on new writes (stored data loads whatever it holds).

The Mind Map types content per role: a system message holds text, a user message never
holds a tool call, a tool message answers calls, an assistant turn has one of four
statuses. Writes that break this are refused with a `ValidationError` naming the role and
the part; reads never are, so documents written by older versions (or by a newer one, with
part types this version does not know: `UnknownPart`) still load and round-trip.
"""

from __future__ import annotations

from mindstore.errors import ValidationError
from mindstore.model.messages import (
    AnyMessage,
    AssistantMessage,
    CompressionMessage,
    InformationalMessage,
    SystemMessage,
    TaskConfigMessage,
    TaskEntryMessage,
    TaskExitMessage,
    ToolMessage,
    UnknownMessage,
    UserMessage,
)
from mindstore.model.parts import (
    CompressionPart,
    InformationalPart,
    ReasoningPart,
    TaskConfigPart,
    TaskEntryPart,
    TaskExitPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    UnknownPart,
)

ASSISTANT_STATUSES = frozenset({"loading", "completed", "error", "interrupted"})
BOOKKEEPING = (TaskConfigPart, TaskEntryPart, TaskExitPart, CompressionPart)
"""Parts only their own role's message carries."""

FORBIDDEN: dict[type, tuple[type, ...]] = {
    SystemMessage: (ToolCallPart, ToolResultPart, ReasoningPart, *BOOKKEEPING),
    UserMessage: (ToolCallPart, ToolResultPart, ReasoningPart, *BOOKKEEPING),
    AssistantMessage: (ToolResultPart, *BOOKKEEPING),
    ToolMessage: (ToolCallPart, ReasoningPart, *BOOKKEEPING),
    InformationalMessage: (ToolCallPart, ToolResultPart, *BOOKKEEPING),
}
REQUIRED_FIRST: dict[type, type] = {
    TaskConfigMessage: TaskConfigPart,
    TaskEntryMessage: TaskEntryPart,
    TaskExitMessage: TaskExitPart,
    CompressionMessage: CompressionPart,
    ToolMessage: ToolResultPart,
}


def check_role_content(message: AnyMessage) -> None:
    """Refuse content the message's role cannot hold (new writes only)."""
    if isinstance(message, UnknownMessage):
        return
    kind = type(message)
    role = message.role
    parts = list(message.content)
    required = REQUIRED_FIRST.get(kind)
    if required is not None:
        if not parts or not isinstance(parts[0], required):
            raise ValidationError(f"a {role} message starts with a {required.__name__}")
        if kind is not ToolMessage:
            extra = [p for p in parts[1:] if not isinstance(p, UnknownPart)]
            if extra:
                raise ValidationError(f"a {role} message holds one {required.__name__}, "
                                      f"got also {type(extra[0]).__name__}")  # fmt: skip
    if kind is SystemMessage:
        wrong = [p for p in parts if not isinstance(p, (TextPart, UnknownPart))]
        if wrong:
            raise ValidationError(f"a system message holds text, got {type(wrong[0]).__name__}")
    for part in parts:
        if isinstance(part, FORBIDDEN.get(kind, ())):
            raise ValidationError(f"a {role} message cannot hold a {type(part).__name__}")
    if isinstance(message, AssistantMessage) and message.status not in ASSISTANT_STATUSES:
        raise ValidationError(
            f"status must be one of {', '.join(sorted(ASSISTANT_STATUSES))}, got {message.status!r}"
        )
    if isinstance(message, InformationalMessage) and parts and not any(
        isinstance(p, InformationalPart) for p in parts
    ):
        raise ValidationError("an informational message holds an InformationalPart")
