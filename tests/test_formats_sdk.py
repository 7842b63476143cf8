"""The exports are accepted by the providers' own SDK types, where those SDKs are installed.

The SDKs are not dependencies of mindstore: each test is skipped when its SDK is missing.
OpenAI and Anthropic describe requests as TypedDicts (validated here with pydantic, every
lazily checked iterable consumed); Google's SDK has pydantic models that refuse unknown
fields. Both the exports of mindstore conversations and the drawn payloads of each format
(which the round-trip tests use) are checked, so "valid payload" means valid to the SDK.
"""

from __future__ import annotations

import collections.abc as abc
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from format_strategies import (
    anthropic_payloads,
    conversations,
    gemini_payloads,
    openai_chat_payloads,
    responses_payloads,
)
from mindstore import formats

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def consume(value: Any) -> Any:
    """Walk a validated value so pydantic checks the items of lazily validated iterables."""
    if isinstance(value, dict):
        return {key: consume(item) for key, item in value.items()}
    if isinstance(value, (str, bytes)):
        return value
    if isinstance(value, abc.Iterable):
        return [consume(item) for item in value]
    return value


def openai_chat_check() -> Any:
    pytest.importorskip("openai")
    from openai.types.chat import ChatCompletionMessageParam
    from pydantic import TypeAdapter

    adapter = TypeAdapter(list[ChatCompletionMessageParam])
    return lambda payload: consume(adapter.validate_python(payload))


def responses_check() -> Any:
    pytest.importorskip("openai")
    from openai.types.responses import ResponseInputParam
    from pydantic import TypeAdapter

    adapter = TypeAdapter(ResponseInputParam)
    return lambda payload: consume(adapter.validate_python(payload))


def anthropic_check() -> Any:
    pytest.importorskip("anthropic")
    from anthropic.types import MessageParam, TextBlockParam
    from pydantic import TypeAdapter

    messages = TypeAdapter(list[MessageParam])
    system = TypeAdapter(str | list[TextBlockParam])

    def check(payload: dict[str, Any]) -> None:
        assert set(payload) <= {"system", "messages"}
        consume(messages.validate_python(payload["messages"]))
        if "system" in payload:
            consume(system.validate_python(payload["system"]))

    return check


def gemini_check() -> Any:
    pytest.importorskip("google.genai")
    from google.genai import types

    def check(payload: dict[str, Any]) -> None:
        assert set(payload) <= {"system_instruction", "contents"}
        for content in payload["contents"]:
            types.Content.model_validate(content)
        if "system_instruction" in payload:
            types.Content.model_validate(payload["system_instruction"])

    return check


@SETTINGS
@given(conversation=conversations())
def test_openai_chat_export_is_valid(conversation: list[Any]) -> None:
    openai_chat_check()(formats.to_openai_chat(conversation))


@SETTINGS
@given(conversation=conversations())
def test_responses_export_is_valid(conversation: list[Any]) -> None:
    responses_check()(formats.to_responses(conversation))


@SETTINGS
@given(conversation=conversations())
def test_anthropic_export_is_valid(conversation: list[Any]) -> None:
    anthropic_check()(formats.to_anthropic(conversation))


@SETTINGS
@given(conversation=conversations())
def test_gemini_export_is_valid(conversation: list[Any]) -> None:
    gemini_check()(formats.to_gemini(conversation))


@pytest.mark.parametrize(
    ("strategy", "check"),
    [
        (openai_chat_payloads(), openai_chat_check),
        (responses_payloads(), responses_check),
        (anthropic_payloads(), anthropic_check),
        (gemini_payloads(), gemini_check),
    ],
    ids=["openai_chat", "responses", "anthropic", "gemini"],
)
def test_drawn_payloads_are_valid(strategy: Any, check: Any) -> None:
    validate = check()

    @SETTINGS
    @given(payload=strategy)
    def run(payload: Any) -> None:
        validate(payload)

    run()


def test_the_sdk_types_do_refuse_a_bad_payload() -> None:
    """The checks above can fail: a tool message without its call id is refused."""
    from pydantic import ValidationError as PydanticError

    with pytest.raises(PydanticError):
        openai_chat_check()([{"role": "tool", "content": "x"}])
    with pytest.raises(PydanticError):
        gemini_check()({"contents": [{"role": "model", "parts": [{"function_call_x": {}}]}]})
