"""What the provider exports send for redacted and empty content (pure).

A redacted message (docs/lifecycle.md) keeps its shape but not its content: its parts are
tombstones, an empty text, an image without data, a tool result without a result. Sent as
they are, they make requests a provider refuses (Anthropic: empty content, an empty text
block; Gemini: an empty text part) or that tell the model nothing. So every provider export
first passes the conversation through `outgoing` (docs/formats.md, "Redacted and empty
turns"):

* **a redacted part becomes a placeholder**, the text `REDACTED`: a text or media part is a
  text part saying ``[redacted]`` (several in a row are one), a tool result's output is
  ``[redacted]``; a tool call stays a call (its arguments are gone: ``{}``), so every result
  still follows its call; redacted reasoning is left out (it has no signature any more,
  and a model cannot be sent reasoning it did not sign);
* **a redacted message is exported in the canonical form**: the provider details kept from
  its import (the format's stash) describe content that is gone, and are not applied;
* **a text the API refuses is left out** (Anthropic: empty or whitespace-only; Gemini and
  the OpenAI APIs: empty), with reasoning holding one and no signature: a turn that
  produced no text, a streamed message not written yet. An empty user turn tells the model
  nothing, and a request holding one is not what any provider's own client sends;
* **a message left with nothing the format carries is left out before turns are formed**,
  so where a provider wants turns to alternate (Anthropic, Gemini) the turns around it
  merge into one, as consecutive messages of one side always do.

A message that holds the format's import entry and was never redacted is exported as it
was imported (`to_x(from_x(p)) == p`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mindstore.formats.conversation import model_messages
from mindstore.formats.stash import read_entry
from mindstore.model.base import JSON
from mindstore.model.messages import (
    AnyMessage,
    AssistantMessage,
    MessageBase,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from mindstore.model.parts import (
    ReasoningPart,
    RedactedThinkingPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from mindstore.model.plans.redaction import redaction_of

__all__ = [
    "NO_OUTPUT",
    "REDACTED",
    "outgoing",
    "refused_by_anthropic",
    "refused_by_gemini",
    "refused_by_openai",
]

REDACTED = "[redacted]"
"""What a model is sent in place of redacted content."""
NO_OUTPUT = "(no output)"
"""What Anthropic is sent for an error result without any text (it refuses an empty one)."""

Sent = SystemMessage | UserMessage | AssistantMessage | ToolMessage
"""What a model is sent (`model_messages`)."""
Carries = Callable[[MessageBase], bool]
"""Whether a format can send anything of a message (its parts render to something)."""
Blank = Callable[[str], bool]
"""Whether an API refuses a text part holding this text."""


def outgoing(
    messages: Sequence[AnyMessage],
    format_name: str,
    carries: Carries | None = None,
    *,
    blank: Blank | None = None,
) -> list[Sent]:
    """The messages a provider export sends, redacted parts as placeholders (see the module
    doc). `blank` says which texts the API refuses (`refused_by_anthropic`,
    `refused_by_gemini`): text and unsigned reasoning parts holding one are left out (None:
    the API takes any text). `carries` drops, before turns are formed, a message of which
    the format can send nothing (unless it is kept as imported)."""
    out: list[Sent] = []
    for message in model_messages(messages):
        if not isinstance(message, (SystemMessage, UserMessage, AssistantMessage, ToolMessage)):
            continue  # model_messages gives only these (a visible note as a user message)
        record = redaction_of(message)
        if record is None and read_entry(message.metadata, format_name):
            out.append(message)  # as imported
            continue
        shown = _shown(message, record, format_name, blank)
        if shown.content and (carries is None or carries(shown)):
            out.append(shown)
    return out


def _shown(message: Sent, record: JSON | None, format_name: str, blank: Blank | None) -> Sent:
    """The message with placeholders for redacted parts and without empty ones."""
    content = list(message.content)
    redacted: set[int] = set()
    if record is not None:
        redacted = (
            set(range(len(content)))
            if record.get("whole")
            else {i for i in record.get("parts", []) if isinstance(i, int)}
        )
    parts: list[Any] = []
    for index, part in enumerate(content):
        shown = _placeholder(part) if index in redacted else part
        if shown is None or (blank is not None and _blank(shown, blank)):
            continue
        if _is_placeholder(shown) and parts and _is_placeholder(parts[-1]):
            continue  # one placeholder for a run of redacted parts
        parts.append(shown)
    metadata = message.metadata
    if record is not None and metadata and format_name in metadata:
        metadata = {key: value for key, value in metadata.items() if key != format_name} or None
    unchanged = len(parts) == len(content) and all(
        a is b for a, b in zip(parts, content, strict=True)
    )
    if unchanged and metadata is message.metadata:
        return message
    return message.model_copy(update={"content": parts, "metadata": metadata})


def _placeholder(part: Any) -> Any:
    """What a model is sent for a redacted part (None: nothing)."""
    if isinstance(part, ToolCallPart):
        return part
    if isinstance(part, ToolResultPart):
        return part.model_copy(update={"result": REDACTED, "tool_result_contents": [],
                                       "error": None})  # fmt: skip
    if isinstance(part, (ReasoningPart, ThinkingPart, RedactedThinkingPart)):
        return None
    return TextPart(text=REDACTED)


def _is_placeholder(part: Any) -> bool:
    return isinstance(part, TextPart) and part.text == REDACTED


def refused_by_anthropic(text: str) -> bool:
    """Anthropic refuses an empty text block and a whitespace-only one ("text content
    blocks must be non-empty" / "must contain non-whitespace text")."""
    return not text.strip()


def refused_by_gemini(text: str) -> bool:
    """Gemini refuses an empty text part."""
    return text == ""


def refused_by_openai(text: str) -> bool:
    """An empty text: the OpenAI exports leave it out (a whitespace text is content)."""
    return text == ""


def _blank(part: Any, blank: Blank) -> bool:
    """A text the API refuses, or such reasoning without a signature: nothing to send."""
    if isinstance(part, TextPart):
        return blank(part.text)
    if isinstance(part, ReasoningPart):
        return blank(part.reasoning) and not part.signature
    if isinstance(part, ThinkingPart):
        return blank(part.content) and not part.signature
    return False
