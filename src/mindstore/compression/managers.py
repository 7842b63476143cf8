"""Context managers: what is safe to send to the model, without touching history.

The dialog document's contract: a `ContextManager` has a `name` (its key in the registry
that builds managers from configuration, `mindstore.compression.manager_config`) and is
called with the working dialog, returning the dialog to send. The canonical dialog (the
stored task) grows monotonically; a manager returns a pruned copy and never changes the
stored history or the objects it was given.

A dialog here is its message list (what `acme.tasks.messages(...)` or a `ContextWindow`
holds): a manager called with a list returns a list, called with a `ContextWindow`
returns a `ContextWindow` (a new one when it pruned).

Built in: `DefaultContextManager` (the dialog document's truncator over a token budget
derived from the model's context window) and `MessageContextManager` (the agent-graph
format's trimmer by user turns).
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, TypeVar

from mindstore.compression.model_context_sizes import context_window
from mindstore.compression.reducers import remove_tool_messages
from mindstore.compression.tokens import TokenCounter, count_tokens, estimate_tokens
from mindstore.compression.toolpairs import drop_orphan_results, role_of
from mindstore.errors import ValidationError
from mindstore.model.messages import AnyMessage
from mindstore.model.parts import TextPart

TRUNCATION_PREFIX = "[...earlier content truncated...]"
SAFETY_BUFFER = 5_000

Dialog = TypeVar("Dialog")


def dialog_messages(dialog: Any) -> list[AnyMessage]:
    """The messages of a dialog: a message sequence, or an object holding `.messages`."""
    if isinstance(dialog, (list, tuple)):
        return list(dialog)
    if (
        dataclasses.is_dataclass(dialog)
        and not isinstance(dialog, type)
        and hasattr(dialog, "messages")
    ):
        return list(dialog.messages)
    raise ValidationError(
        f"dialog: expected a list of messages or a ContextWindow, got {type(dialog).__name__}"
    )


def with_messages(
    dialog: Dialog, messages: list[AnyMessage], counter: TokenCounter = estimate_tokens
) -> Dialog:
    """`dialog` holding `messages` instead: a list, or a copy of the window (never the input
    changed; the same window back when nothing was pruned)."""
    if isinstance(dialog, (list, tuple)):
        return messages  # type: ignore[return-value]
    if messages == list(dialog.messages):  # type: ignore[attr-defined]
        return dialog
    changes: dict[str, Any] = {"messages": messages}
    fields = {f.name for f in dataclasses.fields(dialog)}  # type: ignore[arg-type]
    if "tokens" in fields:
        changes["tokens"] = count_tokens(messages, counter)
    if "trimmed" in fields:
        changes["trimmed"] = True
    return dataclasses.replace(dialog, **changes)  # type: ignore[type-var]


def truncated_border(
    message: AnyMessage, tokens: int, counter: TokenCounter, chars_per_token: int = 4
) -> AnyMessage | None:
    """The end of `message`'s text in `tokens` (by `counter`), behind the truncation prefix;
    None if it has none or nothing fits. The message at the border of a window: this
    module's `DefaultContextManager` and the context window's fitting
    (`compression.window`) cut it the same way."""
    text = message.text() if hasattr(message, "text") else ""
    if not text or role_of(message) == "tool":
        return None
    overhead = counter(message.model_copy(update={"content": [TextPart(text=TRUNCATION_PREFIX)]}))
    chars = (tokens - overhead) * chars_per_token
    if chars <= 0:
        return None
    kept = text[-chars:]
    truncated = message.model_copy(update={"content": [TextPart(text=TRUNCATION_PREFIX + kept)]})
    while kept and counter(truncated) > tokens:  # a custom counter may weigh more
        kept = kept[len(kept) // 10 + 1 :]
        truncated = message.model_copy(
            update={"content": [TextPart(text=TRUNCATION_PREFIX + kept)]}
        )
    return truncated if kept else None


class ContextManager(ABC):
    """A hook applied to the working dialog before each model call.

    Subclasses set `name` (the registry key: `register_context_manager(cls)` reads it)
    and implement `__call__`, which may return the dialog unchanged or a pruned copy,
    never a changed original.
    """

    name: ClassVar[str]

    @abstractmethod
    def __call__(self, dialog: Dialog) -> Dialog:
        """Return a dialog that is safe to send to the model."""


class DefaultContextManager(ContextManager):
    """The dialog document's truncator over a token budget.

    The budget is `max_tokens` when given, else the model's context window (the table in
    `mindstore.compression.model_context_sizes`, `context_windows=` to override), minus
    `safety_buffer` (5,000 tokens) so a call never lands right at the model's edge:

    1. the first message (system / developer prompt) is always kept;
    2. messages are kept from the tail inward while they fit;
    3. the border message, the oldest that only partly fits, keeps the end of its text
       behind `[...earlier content truncated...]` (messages without text are dropped);
    4. tool results whose call fell off are dropped too, so the request stays valid.

    `DefaultContextManager(32_000)` (a number first) still reads as `max_tokens`.
    """

    name = "default"
    SAFETY_BUFFER: ClassVar[int] = SAFETY_BUFFER

    def __init__(
        self,
        model_name: str | int | None = None,
        max_tokens: int | None = None,
        *,
        safety_buffer: int = SAFETY_BUFFER,
        counter: TokenCounter = estimate_tokens,
        chars_per_token: int = 4,
        context_windows: Mapping[str, int] | None = None,
    ) -> None:
        if isinstance(model_name, int) and not isinstance(model_name, bool):
            if max_tokens is not None:
                raise ValidationError("max_tokens given twice (a number first is max_tokens)")
            model_name, max_tokens = None, model_name
        if max_tokens is None:
            if model_name is None:
                raise ValidationError("model_name or max_tokens is required")
            if not isinstance(model_name, str):  # a bool: an int subclass, not a count
                raise ValidationError(f"model_name must be a non-empty string, got {model_name!r}")
            max_tokens = context_window(model_name, context_windows)
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens <= 0:
            raise ValidationError(f"max_tokens must be a positive integer, got {max_tokens!r}")
        if not isinstance(safety_buffer, int) or safety_buffer < 0:
            raise ValidationError(f"safety_buffer must be >= 0, got {safety_buffer!r}")
        self.model_name = model_name
        self.max_tokens = max_tokens
        self.safety_buffer = safety_buffer
        self.counter = counter
        self.chars_per_token = chars_per_token

    @property
    def budget(self) -> int:
        return max(self.max_tokens - self.safety_buffer, 0)

    def __call__(self, dialog: Dialog) -> Dialog:
        return with_messages(dialog, self.prune(dialog_messages(dialog)), self.counter)

    def prune(self, messages: Sequence[AnyMessage]) -> list[AnyMessage]:
        """The messages that fit the budget (a new list; the input is not changed)."""
        if not messages:
            return []
        budget = self.budget
        if sum(self.counter(m) for m in messages) <= budget:
            return list(messages)
        first, rest = messages[0], list(messages[1:])
        remaining = budget - self.counter(first)
        tail: list[AnyMessage] = []
        for message in reversed(rest):
            cost = self.counter(message)
            if cost <= remaining:
                tail.append(message)
                remaining -= cost
                continue
            border = truncated_border(message, remaining, self.counter, self.chars_per_token)
            if border is not None:
                tail.append(border)
            break
        return [first, *drop_orphan_results(list(reversed(tail)))]


class MessageContextManager(ContextManager):
    """The agent-graph format's trimmer: the first message plus the turns of the last
    `max_messages` user messages; with `remove_tool_msgs`, completed tool sequences are
    dropped too."""

    name = "message_count"

    def __init__(self, max_messages: int = 10, remove_tool_msgs: bool = False) -> None:
        if max_messages < 1:
            raise ValidationError(f"max_messages must be >= 1, got {max_messages}")
        self.max_messages = max_messages
        self.remove_tool_msgs = remove_tool_msgs

    def __call__(self, dialog: Dialog) -> Dialog:
        return with_messages(dialog, self.prune(dialog_messages(dialog)))

    def prune(self, messages: Sequence[AnyMessage]) -> list[AnyMessage]:
        if not messages:
            return []
        first, rest = messages[0], list(messages[1:])
        user_positions = [i for i, m in enumerate(rest) if role_of(m) == "user"]
        if len(user_positions) > self.max_messages:
            rest = drop_orphan_results(rest[user_positions[-self.max_messages] :])
        if self.remove_tool_msgs:
            rest = remove_tool_messages(rest)
        return [first, *rest]
