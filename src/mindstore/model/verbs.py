"""Each verb declared once: its signature, docstring, checks, planner and guarded ids.

A verb is a typed stub: its parameters are the verb's (the Mind Map's names and order), its
docstring is the verb's, and its body checks the arguments and returns the `Step` that says
which planner runs with which arguments and which message ids guard the write. Both homes
are made from the one stub by `model/verb_homes.py` (`in_memory`, `in_store`), so neither
can drift from the other (docs/contract.md); the names of that module are re-exported here,
their former import path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from mindstore.ids import check_name
from mindstore.model import plans
from mindstore.model.base import JSON
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
    Usage,
    UserMessage,
    parse_message,
)
from mindstore.model.parts import (
    ImagePart,
    InformationalPart,
    ObserverResult,
    TaskConfigPart,
    TextPart,
    ToolCallPart,
    ToolResultContent,
)
from mindstore.model.plans.core import Plan
from mindstore.model.specs import ToolResultSpec, resolve_alias
from mindstore.model.verb_homes import (
    MemoryHome,
    Replay,
    Step,
    StoreHome,
    check_messages,
    exit_answer_id,
    in_memory,
    in_memory_or_false,
    in_store,
    tool_call_id_of,
)

__all__ = [
    "MemoryHome",
    "Replay",
    "Step",
    "StoreHome",
    "add_assistant_message",
    "add_compression_message",
    "add_human_message",
    "add_informational_message",
    "add_message",
    "add_messages",
    "add_reasoning_part",
    "add_system_message",
    "add_task_config",
    "add_task_entry",
    "add_task_exit",
    "add_text_part",
    "add_tool_call_part",
    "add_tool_result_message",
    "answer_tool_call",
    "check_messages",
    "exit_answer_id",
    "finish_assistant_message",
    "in_memory",
    "in_memory_or_false",
    "in_store",
    "tool_call_id_of",
]

R = TypeVar("R")


# ---------------------------------------------------------------------------- the verbs
# The same names, defaults, replays and errors in both homes (docs/contract.md).
def _part_step(planner: Callable[..., Plan], message_id: str, args: tuple[object, ...]) -> Step[R]:
    """A part verb's step: it changes the message `message_id` (checked, in both homes)."""
    return Step(planner, args, locate=plans.check_message_id(message_id))


def add_message(message: AnyMessage | JSON) -> Step[AnyMessage]:
    """Append any message, unknown roles included (kept as they are).

    The general form of every `add_*` verb: the message is checked against its role's
    rules (`model/roles.py`), planned like the specific verbs and written in one guarded
    update. With a message id the call is exactly-once: a replay returns the stored message.

    Args:
        message: A message model (`UserMessage`, `AssistantMessage`, ...) or its dict form
            (`{"role": "user", "content": [...]}`).

    Returns:
        The stored message (with `scope`, `depth`, `task_id` and timestamps filled in).

    Raises:
        ValidationError: A malformed message or a part its role may not hold.
        NotFound: No such task in this view.
        InvalidTransition: The task's state or level does not allow it.
        TaskTooLarge: The message cannot fit a document even alone.
        Conflict: Writers kept racing for `RetryPolicy.attempts` tries.
    """
    if isinstance(message, dict):
        message = parse_message(message)
    checked = check_messages([message])[0]
    return Step(plans.plan_add_message, (checked,), ids=(checked.id,))


def add_messages(messages: Sequence[AnyMessage]) -> Step[list[AnyMessage]]:
    """Append several messages in one atomic write (all or nothing).

    Args:
        messages: The messages, in order; each needs an id (they are the replay guard).

    Returns:
        The stored messages, in order (on a replay, the ones already stored).

    Raises:
        ValidationError: Not a list of messages, a malformed message or id.
        NotFound: No such task in this view.
        InvalidTransition: The task's state or level does not allow one of them.
        TaskTooLarge: A message cannot fit a document even alone.
        Conflict: Writers kept racing.

    Example:
        ```python
        from mindstore.formats import from_openai_chat
        await acme.tasks.add_messages(task.id, from_openai_chat(body["messages"]))
        ```
    """
    checked = check_messages(messages)
    ids = [check_name(m.id, "message id") for m in checked]
    return Step(
        plans.plan_add_messages, (checked,), ids=tuple(ids),
        replay=lambda stored: [stored[i] for i in ids],
    )  # fmt: skip


def add_task_config(
    part: TaskConfigPart, timestamp: float | None = None
) -> Step[TaskConfigMessage]:
    """Append a task-config message: the model, tools and compression settings that apply to
    the current level from here on.

    Args:
        part: The `TaskConfigPart`.
        timestamp: Epoch seconds of the message (default: now).

    Returns:
        The stored `TaskConfigMessage`.

    Raises:
        ValidationError: `part` is not a `TaskConfigPart`, or a bad timestamp.
        NotFound: No such task in this view.
        InvalidTransition: The task's state does not allow appends.
    """
    return Step(plans.plan_add_task_config, (part, timestamp))


def add_human_message(
    text: str | Sequence[str] | None = None,
    images: Sequence[ImagePart] | None = None,
    is_ui_hidden: bool = False,
    timestamp: float | None = None,
    message_id: str | None = None,
) -> Step[UserMessage | None]:
    """Append what the person said: a message with role `user`.

    "Human" is the Mind Map's word for the verb; the stored role is `user`, the role every
    provider format (OpenAI, Anthropic, Gemini) and framework uses for the person's turn, so
    exports and analytics need no mapping (docs/glossary.md).

    Args:
        text: The text, or several texts (one text part each); None with `images` only.
        images: `ImagePart`s to attach after the text.
        is_ui_hidden: Keep the message out of the user interface (still sent to the model).
        timestamp: Epoch seconds of the message (default: now).
        message_id: Choose the message id; a replay with the same id returns the stored
            message and writes nothing (exactly-once).

    Returns:
        The stored `UserMessage`, or None when there is nothing to add (no text, no images),
        as the Mind Map returns.

    Raises:
        ValidationError: A bad text, image, id or timestamp.
        NotFound: No such task in this view.
        InvalidTransition: The task's state does not allow appends.
        TaskTooLarge: The message cannot fit a document even alone.

    Example:
        ```python
        await acme.tasks.add_human_message(task.id, "A hotel in Lisbon", message_id="u-1")
        ```
    """
    return Step(
        plans.plan_add_human_message, (text, images, is_ui_hidden, timestamp, message_id),
        ids=(message_id,),
    )  # fmt: skip


def add_system_message(
    text: str, message_id: str | None = None, timestamp: float | None = None,
    *, id: str | None = None,
) -> Step[SystemMessage]:  # fmt: skip
    """Append a system message (instructions for the model).

    Args:
        text: The instructions.
        message_id: Choose the message id (exactly-once, as `add_human_message`).
        timestamp: Epoch seconds of the message (default: now).
        id: The Mind Map's spelling of `message_id` (an alias; give one of the two).

    Returns:
        The stored `SystemMessage`.

    Raises:
        ValidationError: A bad text, id or timestamp, or `id` and `message_id` disagree.
        NotFound: No such task in this view.
        InvalidTransition: The task's state does not allow appends.
    """
    message_id = resolve_alias(message_id, id, "message_id", "id")
    return Step(plans.plan_add_system_message, (text, message_id, timestamp), ids=(message_id,))


def add_assistant_message(
    message_id: str | None = None, timestamp: float | None = None, *, id: str | None = None
) -> Step[AssistantMessage]:
    """Open an assistant turn: an empty assistant message that part verbs then fill.

    The model comes from the current level's config. Fill the turn with `add_text_part`,
    `add_reasoning_part` and `add_tool_call_part` (or stream it: `tasks.stream`), and close
    it with `finish_assistant_message`.

    Args:
        message_id: Choose the message id (exactly-once, as `add_human_message`).
        timestamp: Epoch seconds of the message (default: now).
        id: The Mind Map's spelling of `message_id` (an alias).

    Returns:
        The stored, still open `AssistantMessage`.

    Raises:
        NoConfigForTurn: The task has no config yet (an `InvalidTransition` and a
            `MissingConfig`).
        ValidationError: A bad id or timestamp.
        NotFound: No such task in this view.

    Example:
        ```python
        reply = await acme.tasks.add_assistant_message(task.id)
        await acme.tasks.add_text_part(task.id, reply.id, "Two hotels fit.")
        await acme.tasks.finish_assistant_message(task.id, reply.id, tokens_in=412)
        ```
    """
    message_id = resolve_alias(message_id, id, "message_id", "id")
    return Step(plans.plan_add_assistant_message, (message_id, timestamp), ids=(message_id,))


def add_tool_result_message(
    tool_call_id: str,
    tool_name: str,
    result: Any,
    observer_results: Sequence[ObserverResult] | None = None,
    is_error: bool = False,
    is_approved: bool = True,
    tool_result_contents: Sequence[ToolResultContent] | None = None,
    error_message: str | None = None,
    is_loading: bool = False,
    has_feedback: bool = False,
    timestamp: float | None = None,
    message_id: str | None = None,
    terminate: bool = False,
    metadata: JSON | None = None,
    *,
    id: str | None = None,
) -> Step[ToolMessage]:
    """Append a tool result for a call, without flipping the call's flags.

    Most callers want `answer_tool_call`, which also marks the call answered in the same
    write; this verb stores a result as given (the Mind Map's lower-level verb). The
    optional arguments after `result` may also be given by position, in this order (the
    Mind Map's).

    Args:
        tool_call_id: The id of the call the result belongs to.
        tool_name: The tool's name.
        result: The tool's output: any JSON-like value (large ones are offloaded).
        observer_results: Results of observers that watched the call (`ObserverResult`s).
        is_error: The tool failed; `result` describes the failure.
        is_approved: The call was approved (False: a refused call's result).
        tool_result_contents: Rich result contents (`ToolResultContent`: images, files).
        error_message: A short error text for people.
        is_loading: The result is still being produced (a placeholder to update).
        has_feedback: The user left feedback on the result.
        timestamp: Epoch seconds of the message (default: now).
        message_id: Choose the result message's id (exactly-once: a replay returns the
            stored result).
        terminate: The result ends the agent's run (the caller's signal, stored).
        metadata: JSON-like dict kept on the message.
        id: The Mind Map's spelling of `message_id` (an alias).

    Returns:
        The stored `ToolMessage`.

    Raises:
        ValidationError: A bad argument (a flag that is not a bool, metadata that is not
            a dict with string keys, ...), or `id` and `message_id` disagree.
        NotFound: No such task in this view.
        InvalidTransition: The task's state does not allow appends.
        TaskTooLarge: The result is above the payload limit (15 MiB).
    """
    spec = ToolResultSpec.from_call((), {
        "observer_results": observer_results, "is_error": is_error, "is_approved": is_approved,
        "tool_result_contents": tool_result_contents, "error_message": error_message,
        "is_loading": is_loading, "has_feedback": has_feedback, "timestamp": timestamp,
        "message_id": message_id, "terminate": terminate, "metadata": metadata, "id": id,
    })  # fmt: skip
    return Step(
        plans.plan_add_tool_result_message, (tool_call_id, tool_name, result, spec),
        ids=(spec.message_id,),
    )  # fmt: skip


def add_informational_message(
    informational_type: str,
    details: str,
    is_visible_ai: bool = False,
    is_visible_ui: bool = False,
    additional_data: JSON | list[JSON] | None = None,
    timestamp: float | None = None,
    message_id: str | None = None,
) -> Step[InformationalMessage]:
    """Append an informational message: a note about the run (a status, a warning, a
    progress event) that is shown or sent only where its flags say.

    Args:
        informational_type: What kind of note (free text, e.g. `"status"`).
        details: The note.
        is_visible_ai: Send it to the model as context.
        is_visible_ui: Show it in the user interface.
        additional_data: JSON-like data kept with the note.
        timestamp: Epoch seconds of the message (default: now).
        message_id: Choose the message id (exactly-once).

    Returns:
        The stored `InformationalMessage`.

    Raises:
        ValidationError: A bad argument.
        NotFound: No such task in this view.
        InvalidTransition: The task's state does not allow appends.
    """
    return Step(
        plans.plan_add_informational_message, (informational_type, details, is_visible_ai,
        is_visible_ui, additional_data, timestamp, message_id), ids=(message_id,),
    )  # fmt: skip


def add_compression_message(
    start_idx: int,
    end_idx: int,
    reason: str,
    strategies: Sequence[str],
    compressed_message_ids: Sequence[str],
    kept_message_ids: Sequence[str],
    cache: JSON | None = None,
    metadata: JSON | None = None,
    timestamp: float | None = None,
    message_id: str | None = None,
) -> Step[CompressionMessage]:
    """Record a compression of the current level: which messages a summary replaces and
    which stay (a checkpoint; docs/compression.md). The context window reads it; the stored
    history itself is never shortened.

    Usually written by the context window (`tasks.context`), not by hand.

    Args:
        start_idx: Index of the first message the compression covers.
        end_idx: Index of the last message it covers.
        reason: Why it ran (e.g. `"token_limit"`).
        strategies: The names of the strategies applied, in order.
        compressed_message_ids: Ids of the messages the compression replaces (stored).
        kept_message_ids: Ids of the messages kept as they are (stored).
        cache: The strategies' reusable state (JSON-like).
        metadata: JSON-like dict kept on the message.
        timestamp: Epoch seconds of the message (default: now).
        message_id: Choose the message id (exactly-once).

    Returns:
        The stored `CompressionMessage`.

    Raises:
        ValidationError: A bad argument, or a referenced message id that the task does not
            hold (the store's write filter requires every one; no read first).
        NotFound: No such task in this view.
        InvalidTransition: The task's state does not allow appends.
    """
    referenced = plans.compression_ids(compressed_message_ids, kept_message_ids)
    return Step(
        plans.plan_add_compression_message, (start_idx, end_idx, reason, strategies,
        compressed_message_ids, kept_message_ids, cache, metadata, timestamp, message_id),
        ids=(message_id,), require_ids=tuple(sorted(referenced)),
    )  # fmt: skip


def answer_tool_call(
    tool_call: ToolCallPart | str,
    result: Any,
    observer_results: Sequence[ObserverResult] | None = None,
    is_error: bool = False,
    is_approved: bool = True,
    tool_result_contents: Sequence[ToolResultContent] | None = None,
    error_message: str | None = None,
    is_loading: bool = False,
    has_feedback: bool = False,
    timestamp: float | None = None,
    message_id: str | None = None,
    terminate: bool = False,
    metadata: JSON | None = None,
    *,
    id: str | None = None,
) -> Step[ToolMessage]:
    """Answer an open tool call: flip the call's flags and append its result, in one write.

    The optional arguments after `result` may also be given by position, in this order
    (the Mind Map's: `observer_results, is_error, is_approved, ...`).

    Args:
        tool_call: The open call, as its `ToolCallPart` or its `tool_call_id`.
        result: The tool's output: any JSON-like value (large ones are offloaded).
        observer_results: Results of observers that watched the call (`ObserverResult`s).
        is_error: The tool failed; `result` describes the failure.
        is_approved: The call was approved (False: a refused call's result).
        tool_result_contents: Rich result contents (`ToolResultContent`: images, files).
        error_message: A short error text for people.
        is_loading: The result is still being produced (a placeholder to update).
        has_feedback: The user left feedback on the result.
        timestamp: Epoch seconds of the message (default: now).
        message_id: Choose the result message's id (exactly-once: a replay returns the
            stored result).
        terminate: The result ends the agent's run (the caller's signal, stored).
        metadata: JSON-like dict kept on the message.
        id: The Mind Map's spelling of `message_id` (an alias).

    Returns:
        The stored `ToolMessage`.

    Raises:
        UnknownToolCall: No open call with that id (never made, or already answered; a
            replay with the same `message_id` returns the stored result instead).
        WrongType: `tool_call` is neither a `ToolCallPart` nor a string.
        ValidationError: A bad argument, or `id` and `message_id` disagree.
        NotFound: No such task in this view.
        TaskTooLarge: The result is above the payload limit (15 MiB).

    Example:
        ```python
        await acme.tasks.answer_tool_call(task.id, "c-1", {"hits": 3}, message_id="r-1")
        await acme.tasks.answer_tool_call(task.id, "c-2", "timeout", is_error=True)
        ```
    """
    tool_call_id = check_name(tool_call_id_of(tool_call), "tool_call_id")
    spec = ToolResultSpec.from_call((), {
        "observer_results": observer_results, "is_error": is_error, "is_approved": is_approved,
        "tool_result_contents": tool_result_contents, "error_message": error_message,
        "is_loading": is_loading, "has_feedback": has_feedback, "timestamp": timestamp,
        "message_id": message_id, "terminate": terminate, "metadata": metadata, "id": id,
    })  # fmt: skip
    return Step(plans.plan_answer_tool_call, (tool_call_id, result, spec), ids=(spec.message_id,))


def add_task_entry(
    task_description: Sequence[TextPart | ImagePart | InformationalPart],
    initial_task_config: TaskConfigPart,
    entry_id: str | None = None,
    timestamp: float | None = None,
    trigger_call_id: str | None = None,
) -> Step[TaskEntryMessage]:
    """Enter a sub-task (one level deeper): the entry, its config, hidden context and
    informational messages, in one write.

    The entry records the open tool call its exit will answer (the newest open call of a
    tool with `is_task_entry`, or the one `trigger_call_id` names), so `add_task_exit`
    answers exactly that call.

    Args:
        task_description: What the sub-task is to do (text, image or informational parts).
        initial_task_config: The sub-task level's `TaskConfigPart`.
        entry_id: Choose the entry message's id; it names the new level (its `scope`).
        timestamp: Epoch seconds of the message (default: now).
        trigger_call_id: The open tool call that started the sub-task (default: the newest
            open call of an entry tool).

    Returns:
        The stored `TaskEntryMessage`.

    Raises:
        ValidationError: A bad argument.
        NotFound: No such task, or `trigger_call_id` names no open call.
        InvalidTransition: The task's state does not allow appends.

    Example:
        ```python
        await acme.tasks.add_task_entry(task.id, [TextPart(text="compare two hotels")], config)
        await acme.tasks.current_task_level(task.id)  # 1
        ```
    """
    return Step(
        plans.plan_add_task_entry, (task_description, initial_task_config, entry_id, timestamp,
        trigger_call_id), ids=(entry_id,),
    )  # fmt: skip


def add_task_exit(
    handoff_description: Sequence[TextPart | ImagePart],
    payload_key: str = "task_result",
    timestamp: float | None = None,
    exit_id: str | None = None,
    result_message_id: str | None = None,
    *,
    payloadKey: str | None = None,  # the Mind Map's spelling, an alias
) -> Step[tuple[TaskExitMessage, ToolMessage | None]]:
    """Leave the current sub-task: the exit and the answer to its triggering tool call, in
    one write. A replay returns the stored exit and the answer it wrote.

    Args:
        handoff_description: What the sub-task hands back (text or image parts); the
            answer to the triggering call carries it under `payload_key`.
        payload_key: The key of the handoff in the answer's result.
        timestamp: Epoch seconds of the message (default: now).
        exit_id: Choose the exit message's id (exactly-once).
        result_message_id: Choose the id of the answer to the triggering call.
        payloadKey: The Mind Map's spelling of `payload_key` (an alias).

    Returns:
        `(exit, answer)`: the stored exit message and the tool result that answers the
        triggering call (None when the entry had no trigger).

    Raises:
        InvalidTransition: The task is at its root level (nothing to exit).
        ValidationError: A bad argument.
        NotFound: No such task in this view.
    """
    payload_key = resolve_alias(payload_key, payloadKey, "payload_key", "payloadKey", "task_result")
    return Step(
        plans.plan_add_task_exit, (handoff_description, payload_key, timestamp, exit_id,
        result_message_id), ids=(exit_id,), also_guard=(result_message_id,), exit_replay=True,
    )  # fmt: skip


def add_text_part(message_id: str, text: str) -> Step[AnyMessage]:
    """Append a text part to an open assistant message.

    Args:
        message_id: The assistant message (from `add_assistant_message`).
        text: The text.

    Returns:
        The updated message.

    Raises:
        NotFound: No such task or message.
        InvalidTransition: The message is not an assistant message.
        ValidationError: `text` is not a string MongoDB can store.
    """
    return _part_step(plans.plan_add_text_part, message_id, (text,))


def add_reasoning_part(
    message_id: str, reasoning: str, signature: str | None = None
) -> Step[AssistantMessage]:
    """Append a reasoning part (the model's visible thinking) to an open assistant message.

    Args:
        message_id: The assistant message.
        reasoning: The reasoning text.
        signature: The provider's signature of the reasoning, kept so it can be sent back.

    Returns:
        The updated message.

    Raises:
        NotFound: No such task or message.
        InvalidTransition: The message is not an assistant message.
        ValidationError: A bad text or signature.
    """
    return _part_step(plans.plan_add_reasoning_part, message_id, (reasoning, signature))


def add_tool_call_part(message_id: str, tool_call: ToolCallPart) -> Step[AssistantMessage]:
    """Append a tool call to an open assistant message; the call is open until answered
    (`answer_tool_call`, or `add_task_exit` for a sub-task's trigger).

    Args:
        message_id: The assistant message.
        tool_call: The `ToolCallPart`.

    Returns:
        The updated message.

    Raises:
        NotFound: No such task or message.
        InvalidTransition: The message is not an assistant message.
        ValidationError: Not a `ToolCallPart`.

    Example:
        ```python
        await acme.tasks.add_tool_call_part(
            task.id, reply.id, ToolCallPart(tool_call_id="c-1", tool_name="research"))
        ```
    """
    return _part_step(plans.plan_add_tool_call_part, message_id, (tool_call,))


def finish_assistant_message(
    message_id: str,
    status: str = "completed",
    usage: Usage | None = None,
    tokens_in: int | None = None,
    tokens_out: int | None = None,
    cache_reads: int | None = None,
    cache_writes: int | None = None,
    cost: float | None = None,
    finished_ts: float | None = None,
) -> Step[AssistantMessage]:
    """Close an assistant turn; its usage rolls up into the task's totals in the same write.

    Give the usage either as a `Usage` or as the separate counts.

    Args:
        message_id: The assistant message.
        status: How the turn ended: `"completed"`, `"error"`, `"interrupted"` or
            `"loading"` (still streaming).
        usage: Token and cost figures as one `Usage`.
        tokens_in: Input tokens.
        tokens_out: Output tokens.
        cache_reads: Input tokens read from the provider's cache.
        cache_writes: Input tokens written to the provider's cache.
        cost: Cost in dollars (finite, >= 0).
        finished_ts: Epoch seconds the turn ended (default: now).

    Returns:
        The finished message.

    Raises:
        NotFound: No such task or message.
        InvalidTransition: The message is not an assistant message.
        ValidationError: A negative, NaN or infinite count or cost, or an unknown status.
    """
    return _part_step(
        plans.plan_finish_assistant_message, message_id, (status, usage, tokens_in, tokens_out,
        cache_reads, cache_writes, cost, finished_ts),
    )  # fmt: skip
