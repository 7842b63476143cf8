"""Context managers: trim a message list to fit a model call, without touching history.

Seed 002's `DefaultContextManager` fits a token budget (first message kept, the rest
filled from the tail, the border message cut with a marker); seed 003's
`MessageContextManager` keeps the last N user turns. Both are pure: the canonical
history in the store never changes, only the list handed to the model does.
"""

from __future__ import annotations

from typing import Sequence

from mindstore.compression.reducers import remove_tool_messages
from mindstore.compression.tokens import TokenCounter, estimate_tokens
from mindstore.compression.toolpairs import drop_orphan_results, role_of
from mindstore.errors import ValidationError
from mindstore.model.messages import AnyMessage
from mindstore.model.parts import TextPart

TRUNCATION_PREFIX = "[...earlier content truncated...]"
SAFETY_BUFFER = 5_000


class DefaultContextManager:
    """Seed 002's truncator over a token budget.

    1. the first message (system / developer prompt) is always kept;
    2. messages are kept from the tail inward while they fit;
    3. the border message, the oldest that only partly fits, keeps the end of its text
       behind `TRUNCATION_PREFIX` (messages without text are dropped instead);
    4. `safety_buffer` tokens (5,000 in the seed) are kept free below `max_tokens`.
    Tool results whose call fell off are dropped too, so the request stays valid.
    """

    name = "default"

    def __init__(
        self,
        max_tokens: int,
        *,
        safety_buffer: int = SAFETY_BUFFER,
        counter: TokenCounter = estimate_tokens,
        chars_per_token: int = 4,
    ) -> None:
        if max_tokens <= 0:
            raise ValidationError(f"max_tokens must be positive, got {max_tokens}")
        if safety_buffer < 0:
            raise ValidationError(f"safety_buffer must be >= 0, got {safety_buffer}")
        self.max_tokens = max_tokens
        self.safety_buffer = safety_buffer
        self.counter = counter
        self.chars_per_token = chars_per_token

    @property
    def budget(self) -> int:
        return max(self.max_tokens - self.safety_buffer, 0)

    def __call__(self, messages: Sequence[AnyMessage]) -> list[AnyMessage]:
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
            border = self._truncate(message, remaining)
            if border is not None:
                tail.append(border)
            break
        return [first, *drop_orphan_results(list(reversed(tail)))]

    def _truncate(self, message: AnyMessage, tokens: int) -> AnyMessage | None:
        """The end of the message's text in `tokens`, behind the prefix; None if it has none."""
        text = message.text() if hasattr(message, "text") else ""
        if not text or role_of(message) == "tool":
            return None
        overhead = self.counter(message.model_copy(update={"content": [TextPart(text=TRUNCATION_PREFIX)]}))
        chars = (tokens - overhead) * self.chars_per_token
        if chars <= 0:
            return None
        kept = text[-chars:]
        truncated = message.model_copy(update={"content": [TextPart(text=TRUNCATION_PREFIX + kept)]})
        while kept and self.counter(truncated) > tokens:  # a custom counter may weigh more
            kept = kept[len(kept) // 10 + 1:]
            truncated = message.model_copy(update={"content": [TextPart(text=TRUNCATION_PREFIX + kept)]})
        return truncated if kept else None


class MessageContextManager:
    """Seed 003's trimmer: the first message plus the turns of the last `max_messages`
    user messages; with `remove_tool_msgs`, completed tool sequences are dropped too."""

    name = "message_count"

    def __init__(self, max_messages: int = 10, remove_tool_msgs: bool = False) -> None:
        if max_messages < 1:
            raise ValidationError(f"max_messages must be >= 1, got {max_messages}")
        self.max_messages = max_messages
        self.remove_tool_msgs = remove_tool_msgs

    def __call__(self, messages: Sequence[AnyMessage]) -> list[AnyMessage]:
        if not messages:
            return []
        first, rest = messages[0], list(messages[1:])
        user_positions = [i for i, m in enumerate(rest) if role_of(m) == "user"]
        if len(user_positions) > self.max_messages:
            rest = drop_orphan_results(rest[user_positions[-self.max_messages]:])
        if self.remove_tool_msgs:
            rest = remove_tool_messages(rest)
        return [first, *rest]
