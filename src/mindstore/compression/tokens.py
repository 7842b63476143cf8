"""Token counting for context budgets: pluggable, with an offline default.

Exact counts need the model's tokenizer (tiktoken, a provider API, ...), which means a
download or a network call; budgets only need a stable, slightly pessimistic estimate.
The default counts the JSON form of a message's content at four characters a token,
plus a small per-message overhead for role and framing, so tool arguments and results
weigh what they weigh in the request.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable

from mindstore.model.messages import AnyMessage

TokenCounter = Callable[[AnyMessage], int]
"""Tokens one message costs in a model request."""

CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD_TOKENS = 4


def estimate_tokens(message: AnyMessage) -> int:
    """About a token per four characters of the message's content, never zero."""
    content = getattr(message, "content", None)
    if content is None:  # an unknown role: weigh its whole raw form
        content = message.to_dict()
    else:
        content = [part.to_dict() if hasattr(part, "to_dict") else part for part in content]
    chars = len(json.dumps(content, ensure_ascii=False, separators=(",", ":"), default=str))
    return MESSAGE_OVERHEAD_TOKENS + math.ceil(chars / CHARS_PER_TOKEN)


def count_tokens(messages: Iterable[AnyMessage], counter: TokenCounter = estimate_tokens) -> int:
    return sum(counter(message) for message in messages)
