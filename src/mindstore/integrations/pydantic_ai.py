"""pydantic-ai message histories stored as mindstore tasks, and a history processor.

* `save_messages(view, task_id, messages)` appends pydantic-ai messages (`result.new_messages()`)
  to a task (created on first use, owner from the view), typed: a `ModelRequest`'s parts
  become system, user and tool messages (a `ToolReturnPart` a `ToolMessage` answering its
  call), a `ModelResponse` one `AssistantMessage` (`TextPart`s, `ReasoningPart`s for
  `ThinkingPart`s, `ToolCallPart`s the task header tracks, usage rolled up).
* `load_messages(view, task_id)` gives them back as `list[ModelMessage]`, exactly
  (`ModelMessagesTypeAdapter` shapes: timestamps, ids, signatures, provider details): what
  the typed model does not hold is kept in each message's metadata under `pydantic_ai` as
  the difference from the canonical rendering (the guarded difference of
  `mindstore.formats.stash`), with where each `ModelRequest` begins.
* `history_processor(view, task_id, max_tokens=...)` returns a processor for an agent's
  history (`ProcessHistory(...)` capability, or `history_processors=[...]`): the stored
  part of the history comes from `tasks.context` (compressed if the level's config says
  so, trimmed to `max_tokens` without splitting a tool call from its result), followed by
  what the current run added and is not stored yet.

`task_id` is a conversation id, as for every adapter (`conversation_ids`): a key such as
``chat-1`` is its own task id, any other string the frameworks accept
(``alice@example.com:chat-1``, ``org/team/chat-1``) names the task `task_id_for` maps it
to, which keeps it as given in its metadata (`conversation_id`).

Saves are exactly-once: each stored message's id is derived from the pydantic-ai message
it came from (its whole content: pydantic-ai stamps every message and part with the time it
was made, to the microsecond, and a run id) and its part's position, so saving the same
messages again (a retried save) stores nothing new, and a save that repeats only some
stored messages (`result.all_messages()` after a history that was saved) is refused with a
`ValidationError` before anything is written.

Messages stored by other code (no `pydantic_ai` entry) are converted canonically:
consecutive user-side messages form one `ModelRequest`, each assistant message a
`ModelResponse`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from pydantic_ai import messages as parts
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelRequest, ModelResponse
from pydantic_ai.usage import RequestUsage

from mindstore.errors import Conflict, NotFound, ValidationError
from mindstore.formats.conversation import settle
from mindstore.formats.stash import diff, patch, read_entry, with_entry
from mindstore.ids import is_name
from mindstore.integrations._derived_ids import derived_id, digest
from mindstore.integrations._tool_args import tool_args
from mindstore.integrations.conversation_ids import task_id_for
from mindstore.model.base import new_id
from mindstore.model.messages import (
    AnyMessage,
    AssistantMessage,
    MessageBase,
    SystemMessage,
    ToolMessage,
    Usage,
    UserMessage,
)
from mindstore.model.parts import ReasoningPart, TextPart, ToolCallPart, ToolResultPart, UnknownPart
from mindstore.operations import operation
from mindstore.protocols import ContextView, TenantView

FORMAT = "pydantic_ai"
PART = "pydantic_ai_part"
"""The part type of a pydantic-ai part kept verbatim (never a type mindstore parses)."""
MARKER = {"integration": "pydantic-ai"}
CONVERSATION_KEY = "conversation_id"
"""The task metadata key holding the conversation id as the caller gave it."""
REQUEST_SIDE = (SystemMessage, UserMessage, ToolMessage)


# -- conversion ---------------------------------------------------------------------------


def from_model_messages(messages: Sequence[ModelMessage]) -> list[AnyMessage]:
    """Typed mindstore messages for pydantic-ai messages (see the module doc).

    Args:
        messages: pydantic-ai `ModelMessage`s.

    Returns:
        mindstore messages, ready for `tasks.add_messages`.

    Raises:
        ValidationError: A message that cannot be converted.
    """
    if isinstance(messages, (str, bytes, dict)) or not isinstance(messages, Sequence):
        raise ValidationError("messages must be a list of pydantic-ai messages")
    for index, given in enumerate(messages):
        if not isinstance(given, (ModelRequest, ModelResponse)):
            raise ValidationError(
                f"messages[{index}]: expected a ModelRequest or ModelResponse, "
                f"got {type(given).__name__}"
            )
    dumped = ModelMessagesTypeAdapter.dump_python(list(messages), mode="json")
    out: list[AnyMessage] = []
    seen: dict[str, int] = {}
    for original in dumped:
        content = digest(original)
        seen[content] = seen.get(content, -1) + 1  # the same message twice in one save
        first = len(out)
        _convert(original, out)
        for position, message in enumerate(out[first:]):
            if isinstance(message, MessageBase):
                message.id = derived_id(FORMAT, content, str(seen[content]), str(position))
    return settle(out)


def _convert(original: dict[str, Any], out: list[AnyMessage]) -> None:
    """Append the mindstore messages of one dumped pydantic-ai message to `out`."""
    if original.get("kind") == "response":
        message = _response(original)
        message.metadata = with_entry(
            None, FORMAT, {"delta": diff(original, _render_response(message)), "first": True}
        )
        out.append(message)
        return
    parts = original.get("parts") or []
    shell = {key: value for key, value in original.items() if key != "parts"}
    built = [_request_part(part) for part in parts]
    for position, (part, request) in enumerate(zip(parts, built, strict=True)):
        entry: dict[str, Any] = {"delta": diff(part, _render_request_part(request))}
        if position == 0:
            entry.update(first=True, request=diff(shell, _request_shell()))
        if isinstance(request, MessageBase):
            request.metadata = with_entry(None, FORMAT, entry)
    if not built:  # an empty request still has its place
        empty = UserMessage(
            metadata=with_entry(
                None,
                FORMAT,
                {"first": True, "empty": True, "request": diff(shell, _request_shell())},
            )
        )
        built.append(empty)
    out.extend(built)


def to_model_messages(messages: Sequence[AnyMessage]) -> list[ModelMessage]:
    """pydantic-ai messages for mindstore messages (exactly those `from_model_messages` made;
    others canonically); bookkeeping messages are left out.

    Args:
        messages: mindstore messages.

    Returns:
        pydantic-ai `ModelMessage`s.
    """
    dumped: list[dict[str, Any]] = []
    request: dict[str, Any] | None = None
    for message in messages:
        if not isinstance(message, (*REQUEST_SIDE, AssistantMessage)):
            continue
        entry = read_entry(message.metadata, FORMAT)
        if isinstance(message, AssistantMessage):
            request = None
            dumped.append(patch(_render_response(message), entry.get("delta")))
            continue
        if request is None or entry.get("first"):
            request = patch(_request_shell(), entry.get("request"))
            request["parts"] = []
            dumped.append(request)
        if not entry.get("empty"):
            request["parts"].append(patch(_render_request_part(message), entry.get("delta")))
    return list(ModelMessagesTypeAdapter.validate_python(dumped))


def _request_shell() -> dict[str, Any]:
    shell = _dump([ModelRequest(parts=[])])[0]
    shell.pop("parts")
    return shell  # type: ignore[no-any-return]


def _request_part(part: dict[str, Any]) -> AnyMessage:
    kind = part.get("part_kind")
    if kind == "system-prompt" and isinstance(part.get("content"), str):
        return SystemMessage(id=new_id(), content=[TextPart(text=part["content"])])
    if kind == "user-prompt" and isinstance(part.get("content"), str):
        return UserMessage(
            id=new_id(), content=[TextPart(text=part["content"])] if part["content"] else []
        )
    if (
        kind in ("tool-return", "retry-prompt")
        and isinstance(part.get("tool_call_id"), str)
        and part.get("tool_name")
    ):
        call_id = part["tool_call_id"] if is_name(part["tool_call_id"]) else new_id()
        failed = kind == "retry-prompt" or part.get("outcome") not in (None, "success")
        return ToolMessage(
            id=new_id(),
            content=[
                ToolResultPart(
                    tool_call_id=call_id,
                    tool_name=str(part["tool_name"]),
                    result=part.get("content"),
                    is_error=failed,
                )
            ],
        )
    return UserMessage(
        id=new_id(), content=[UnknownPart.model_validate({"type": PART, "part": part})]
    )


def _render_request_part(message: AnyMessage) -> dict[str, Any]:
    """The canonical pydantic-ai part of a request-side message (defaults filled in)."""
    verbatim = [
        p for p in message.content if isinstance(p, UnknownPart) and p.raw.get("type") == PART
    ]
    if verbatim and not isinstance(message, ToolMessage):
        return dict(verbatim[0].raw.get("part") or {})
    part: Any
    result = next((p for p in message.content if isinstance(p, ToolResultPart)), None)
    if isinstance(message, ToolMessage) and result is not None:
        part = parts.ToolReturnPart(
            tool_name=result.tool_name, content=result.result, tool_call_id=result.tool_call_id
        )
    else:
        text = "".join(p.text for p in message.content if isinstance(p, TextPart))
        part = (
            parts.SystemPromptPart(text)
            if isinstance(message, SystemMessage)
            else parts.UserPromptPart(text)
        )
    dumped = _dump([ModelRequest(parts=[part])])[0]["parts"][0]
    dumped.pop("timestamp", None)
    return dumped  # type: ignore[no-any-return]


def _response(original: dict[str, Any]) -> AssistantMessage:
    parts: list[Any] = []
    for part in original.get("parts") or []:
        kind = part.get("part_kind")
        if kind == "text" and isinstance(part.get("content"), str):
            parts.append(TextPart(text=part["content"]))
        elif kind == "thinking" and isinstance(part.get("content"), str):
            signature = part.get("signature")
            parts.append(
                ReasoningPart(
                    reasoning=part["content"],
                    signature=signature if isinstance(signature, str) else None,
                )
            )
        elif (
            kind == "tool-call"
            and isinstance(part.get("tool_call_id"), str)
            and is_name(part["tool_call_id"])
        ):
            parts.append(
                ToolCallPart(
                    tool_call_id=part["tool_call_id"],
                    tool_name=str(part.get("tool_name") or ""),
                    args=tool_args(part.get("args")),
                )
            )
        else:
            parts.append(UnknownPart.model_validate({"type": PART, "part": part}))
    usage = original.get("usage") or {}
    return AssistantMessage(
        id=new_id(),
        content=parts,
        status="completed",
        model_id=original.get("model_name"),
        usage=Usage(
            input_tokens=int(usage.get("input_tokens") or 0),
            output_tokens=int(usage.get("output_tokens") or 0),
            cache_read_tokens=int(usage.get("cache_read_tokens") or 0),
            cache_write_tokens=int(usage.get("cache_write_tokens") or 0),
            reasoning_tokens=int(usage.get("output_reasoning_tokens") or 0),
        ),
    )


def _render_response(message: AssistantMessage) -> dict[str, Any]:
    """The canonical `ModelResponse` dict of an assistant message (defaults filled in)."""
    built: list[Any] = []
    verbatim: dict[int, dict[str, Any]] = {}
    for part in message.content:
        if isinstance(part, TextPart):
            built.append(parts.TextPart(part.text))
        elif isinstance(part, ReasoningPart):
            built.append(parts.ThinkingPart(part.reasoning, signature=part.signature))
        elif isinstance(part, ToolCallPart):
            built.append(parts.ToolCallPart(part.tool_name, part.args, part.tool_call_id))
        elif isinstance(part, UnknownPart) and part.raw.get("type") == PART:
            verbatim[len(built)] = dict(part.raw.get("part") or {})
            built.append(parts.TextPart(""))
    usage = message.usage or Usage()
    requested = RequestUsage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        output_reasoning_tokens=usage.reasoning_tokens,
    )
    dumped = _dump([ModelResponse(parts=built, usage=requested, model_name=message.model_id)])[0]
    for position, raw in verbatim.items():
        dumped["parts"][position] = raw
    dumped["timestamp"] = None
    return dumped  # type: ignore[no-any-return]


# -- the store ----------------------------------------------------------------------------


@operation("pydantic_ai.save_messages")
async def save_messages(
    view: TenantView, task_id: str, messages: Sequence[ModelMessage], *, title: str | None = None
) -> None:
    """Append pydantic-ai messages to a task in one atomic write (the task is created with the
    view's owner on first use). Save `result.new_messages()` after each run; saving the same
    messages again stores nothing (see the module doc).

    Args:
        view: A `TenantStore`.
        task_id: The conversation id (a task id, or any id `task_id_for` maps).
        messages: pydantic-ai `ModelMessage`s.
        title: The task's title when it is created.

    Raises:
        ValidationError: A message that cannot be stored (nothing is written).
    """
    conversation_id, task_id = task_id, task_id_for(task_id, "task_id")
    converted = from_model_messages(messages)
    if not converted:
        return
    try:  # the common case: the task is there
        await view.tasks.add_messages(task_id, converted)
        return
    except NotFound:
        pass
    metadata = {**MARKER, CONVERSATION_KEY: conversation_id}
    try:  # the first save: the task and its messages in one insert
        await view.tasks.create(task_id=task_id, title=title, metadata=metadata, messages=converted)
    except Conflict:  # created meanwhile (a racing save, a retry whose insert landed)
        await view.tasks.get(task_id)  # NotFound if it is another owner's
        await view.tasks.add_messages(task_id, converted)


@operation("pydantic_ai.load_messages")
async def load_messages(view: TenantView, task_id: str) -> list[ModelMessage]:
    """The task's messages as pydantic-ai messages (`[]` for a task that does not exist).

    Args:
        view: A `TenantStore` (`store.scoped(tenant)`, optionally with an owner).
        task_id: The conversation id (a task id, or any id `task_id_for` maps).

    Returns:
        pydantic-ai `ModelMessage`s, for `agent.run(..., message_history=...)`.

    Raises:
        ValidationError: A bad task id.

    Example:
        ```python
        history = await load_messages(acme, "chat-1")
        result = await agent.run("And tomorrow?", message_history=history)
        await save_messages(acme, "chat-1", result.new_messages())
        ```
    """
    task_id = task_id_for(task_id, "task_id")
    try:
        return to_model_messages(await view.tasks.messages(task_id))
    except NotFound:
        return []


Processor = Callable[[list[ModelMessage]], Awaitable[list[ModelMessage]]]


def history_processor(
    view: ContextView, task_id: str, *, max_tokens: int, **context: Any
) -> Processor:
    """A pydantic-ai history processor backed by `tasks.context(task_id, max_tokens=...)` (see
    the module doc): the model sees the stored context window, compressed as configured.

    Args:
        view: A `TenantStore`.
        task_id: The conversation id whose window to send.
        max_tokens: The window's token budget.
        **context: Other keyword arguments of `tasks.context` (a strategy, a token counter,
            a summarizer).

    Returns:
        An async function for `Agent(history_processors=[...])`.

    Raises:
        ValidationError: A bad task id or budget.
    """
    task_id = task_id_for(task_id, "task_id")

    async def process(messages: list[ModelMessage]) -> list[ModelMessage]:
        try:
            stored = to_model_messages(await view.tasks.messages(task_id))
        except NotFound:
            return messages
        if len(messages) < len(stored) or _dump(messages[: len(stored)]) != _dump(stored):
            return messages  # not this task's history: leave it alone
        window = await view.tasks.context(task_id, max_tokens=max_tokens, **context)
        tail = messages[len(stored) :]
        return paired(to_model_messages(window.messages), tail) + tail

    return process


def _dump(messages: Sequence[ModelMessage]) -> Any:
    return ModelMessagesTypeAdapter.dump_python(list(messages), mode="json")


def paired(messages: list[ModelMessage], after: Sequence[ModelMessage] = ()) -> list[ModelMessage]:
    """A window that starts with a request and never separates a tool call from its return:
    a return whose call is not in the window, and a call whose return is neither in the
    window nor in what follows it (`after`), are left out (a message left empty goes too)."""
    returned = {
        getattr(part, "tool_call_id", None)
        for message in [*messages, *after]
        if isinstance(message, ModelRequest)
        for part in message.parts
        if getattr(part, "part_kind", "") in ("tool-return", "retry-prompt")
    }
    calls: set[str] = set()
    out: list[ModelMessage] = []
    for message in messages:
        if isinstance(message, ModelResponse):
            parts = [
                part
                for part in message.parts
                if getattr(part, "part_kind", "") != "tool-call"
                or getattr(part, "tool_call_id", None) in returned
            ]
            if not out or not parts:
                continue  # a history cannot start with a response
            calls.update(
                str(getattr(part, "tool_call_id", ""))
                for part in parts
                if getattr(part, "part_kind", "") == "tool-call"
            )
            out.append(_with_parts(message, parts))
            continue
        kept = [
            part
            for part in message.parts
            if getattr(part, "part_kind", "") not in ("tool-return", "retry-prompt")
            or getattr(part, "tool_call_id", None) in calls
        ]
        if kept:
            out.append(_with_parts(message, kept))
    return out


def _with_parts(message: Any, parts: list[Any]) -> Any:
    if list(message.parts) == parts:
        return message
    return type(message)(
        **{**{k: getattr(message, k) for k in message.__dataclass_fields__}, "parts": parts}
    )
