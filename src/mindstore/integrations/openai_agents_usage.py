"""Each model response's usage and model, onto the stored turn (OpenAI Agents SDK).

A `Session` only sees input items, and items carry no usage: the Runner reports a model
response's usage to the run hooks (`on_llm_end`), not to the session. So
`Runner.run(..., session=session, hooks=UsageHooks(session))` hands every response to the
session (`MindstoreSession.record_response`), and the `add_items` that stores the
response's output puts the response's usage (`Usage`: tokens in and out, cache reads and
writes, reasoning tokens) on the assistant message of its first output item, and its model
on every assistant message it produced. The task header, `tasks.get(...).usage` and
`analytics.usage(group_by="model")` then count what the SDK reported, response by
response.

Which stored items a response produced: the Runner saves each step's output right after
the step (the user's input first, alone), so a batch holding model output takes every
response reported since the last such batch. Within the batch a response is found by its
output items (a call by its `call_id`, another item by its `id`, else by its content); a
response none of whose items is found (its output was filtered, or empty) goes to the
batch's first model-output message that has no usage yet, else to the last one. The
attribution (`attribute`) is pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from agents import Agent, RunHooks
from agents.items import ModelResponse
from agents.run_context import RunContextWrapper

from mindstore.integrations._derived_ids import digest
from mindstore.model.messages import AnyMessage, AssistantMessage, Usage


@dataclass(frozen=True)
class Reported:
    """One model response as the SDK reported it: its model, usage and output items' keys."""

    model: str | None
    usage: Usage
    keys: tuple[str, ...]


class ResponseRecorder(Protocol):
    def record_response(self, response: ModelResponse, *, model: str | None = None) -> None: ...


class UsageHooks(RunHooks[Any]):
    """Run hooks that hand every model response to a session, usage and model included.

    `model`: the model name to record when the agent's own does not say it, or when the
    run's `RunConfig(model=...)` overrides the agents' models (the hooks cannot see the run
    config). Otherwise the name is the agent's `model` when it is a string, or its
    `Model` object's `model` attribute (the SDK's OpenAI and LiteLLM models have one), or
    the SDK's default model when the agent names none. With hooks of your own, call
    `session.record_response(response, model=...)` from their `on_llm_end` instead.
    """

    def __init__(self, session: ResponseRecorder, *, model: str | None = None) -> None:
        self.session = session
        self.model = model

    async def on_llm_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse
    ) -> None:
        """Hand the model response to the session (`MindstoreSession.record_response`).

        Args:
            context: The SDK's run context.
            agent: The agent that called the model (its `model`, when a string, is recorded).
            response: The model's response, with its usage.
        """
        self.session.record_response(response, model=self.model or model_name(agent))


def model_name(agent: Any) -> str | None:
    """The model an agent runs on, by name (see `UsageHooks`)."""
    model = getattr(agent, "model", None)
    if isinstance(model, str):
        return model or None
    name = getattr(model, "model", None)
    if isinstance(name, str) and name:
        return name
    if model is None:
        try:
            from agents.models import get_default_model
        except ImportError:  # pragma: no cover - older SDKs
            return None
        return get_default_model()
    return None


def reported(response: ModelResponse, model: str | None) -> Reported:
    """What a session keeps of one response until its output is stored."""
    usage = response.usage
    details = usage.input_tokens_details
    reasoning = usage.output_tokens_details
    return Reported(
        model=model,
        usage=Usage(
            input_tokens=usage.input_tokens or 0,
            output_tokens=usage.output_tokens or 0,
            cache_read_tokens=getattr(details, "cached_tokens", 0) or 0,
            cache_write_tokens=getattr(details, "cache_write_tokens", 0) or 0,
            reasoning_tokens=getattr(reasoning, "reasoning_tokens", 0) or 0,
        ),
        keys=tuple(item_key(item) for item in response.to_input_items()),
    )


def item_key(item: Any) -> str:
    """How an output item is recognised among stored items: a call by its `call_id`, an
    item with an id by its id, anything else by its content (absent and null fields alike)."""
    if not isinstance(item, Mapping):
        return digest(repr(item))
    kind = item.get("type") or ("message" if "role" in item else None)
    for field in ("call_id", "id"):
        value = item.get(field)
        if isinstance(value, str) and value:
            return f"{kind}|{field}|{value}"
    return digest(_without_nulls(item))


def _without_nulls(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def attribute(
    items: Sequence[Any], messages: Sequence[AnyMessage], pending: Sequence[Reported]
) -> int:
    """Put the pending responses' usage and models on this batch's messages (one message
    per item, in place); returns how many of `pending` the batch took (all of them when it
    holds model output, else none)."""
    outputs = [i for i, message in enumerate(messages) if isinstance(message, AssistantMessage)]
    if not outputs or not pending:
        return 0
    keys = [item_key(items[i]) for i in outputs]
    homes: dict[int, list[Reported]] = {}
    models: dict[int, str | None] = {}
    unplaced: list[Reported] = []
    cursor = 0
    for response in pending:
        wanted = set(response.keys)
        hit = next((p for p in range(cursor, len(outputs)) if keys[p] in wanted), None)
        if hit is None:
            unplaced.append(response)
            continue
        homes.setdefault(outputs[hit], []).append(response)
        cursor = hit
        while cursor < len(outputs) and keys[cursor] in wanted:
            models.setdefault(outputs[cursor], response.model)
            cursor += 1
    for response in unplaced:
        free = [i for i in outputs if i not in homes]
        home = free[0] if free else outputs[-1]
        homes.setdefault(home, []).append(response)
        models.setdefault(home, response.model)
    for index, responses in homes.items():
        message = messages[index]
        if isinstance(message, AssistantMessage):
            message.usage = _sum([r.usage for r in responses])
    for index, model in models.items():
        message = messages[index]
        if isinstance(message, AssistantMessage) and model:
            message.model_id = model
    return len(pending)


def _sum(usages: Sequence[Usage]) -> Usage:
    if len(usages) == 1:
        return usages[0].model_copy(deep=True)
    return Usage(
        input_tokens=sum(u.input_tokens for u in usages),
        output_tokens=sum(u.output_tokens for u in usages),
        cache_read_tokens=sum(u.cache_read_tokens for u in usages),
        cache_write_tokens=sum(u.cache_write_tokens for u in usages),
        reasoning_tokens=sum(u.reasoning_tokens for u in usages),
    )
