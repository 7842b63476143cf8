"""Context window sizes of known models, shipped with the package (no network).

`DefaultContextManager(model_name)` needs the model's window when no `max_tokens` is given.
Provider SDKs and model catalogues know it, but asking them means a download or a call;
a budget only needs the number. The table below holds the input window (the most
tokens a request may carry, which is what pruning must respect; for models that reserve
part of a larger total window for output, the input share) of current OpenAI, Anthropic
and Google Gemini models. Applications add or correct entries with
`register_context_window` (process-wide) or the manager's `context_windows=` (one
manager), both consulted before the table.

Names are matched after lower-casing and dropping a provider prefix (`openai/gpt-4o`,
`models/gemini-2.5-pro`, `anthropic.claude-…` on Bedrock, `…@date` on Vertex); a name
that is a known model plus a suffix (`gpt-4o-2024-08-06`, `claude-sonnet-4-5-20250929`,
`gemini-1.5-pro-002`) takes the longest known model it extends.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from mindstore.errors import ValidationError

KNOWN_CONTEXT_WINDOWS: Mapping[str, int] = {
    # OpenAI
    "gpt-3.5-turbo": 16_385,
    "gpt-4": 8_192,
    "gpt-4-32k": 32_768,
    "gpt-4-turbo": 128_000,
    "gpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "chatgpt-4o-latest": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.1-mini": 1_047_576,
    "gpt-4.1-nano": 1_047_576,
    "gpt-4.5-preview": 128_000,
    "gpt-5": 272_000,
    "gpt-5-mini": 272_000,
    "gpt-5-nano": 272_000,
    "gpt-5-chat": 128_000,
    "gpt-5.1": 272_000,
    "o1": 200_000,
    "o1-mini": 128_000,
    "o1-preview": 128_000,
    "o1-pro": 200_000,
    "o3": 200_000,
    "o3-mini": 200_000,
    "o3-pro": 200_000,
    "o4-mini": 200_000,
    # Anthropic
    "claude-3-haiku": 200_000,
    "claude-3-sonnet": 200_000,
    "claude-3-opus": 200_000,
    "claude-3-5-haiku": 200_000,
    "claude-3-5-sonnet": 200_000,
    "claude-3-7-sonnet": 200_000,
    "claude-sonnet-4": 200_000,
    "claude-sonnet-4-5": 200_000,
    "claude-opus-4": 200_000,
    "claude-opus-4-1": 200_000,
    "claude-opus-4-5": 200_000,
    "claude-haiku-4-5": 200_000,
    # Google Gemini
    "gemini-1.5-flash": 1_048_576,
    "gemini-1.5-flash-8b": 1_048_576,
    "gemini-1.5-pro": 2_097_152,
    "gemini-2.0-flash": 1_048_576,
    "gemini-2.0-flash-lite": 1_048_576,
    "gemini-2.5-flash": 1_048_576,
    "gemini-2.5-flash-lite": 1_048_576,
    "gemini-2.5-pro": 1_048_576,
    "gemini-3-pro-preview": 1_048_576,
}  # fmt: skip

_overrides: dict[str, int] = {}
_BEDROCK_PREFIX = re.compile(r"^(?:[a-z]{2}\.)?(?:anthropic|openai|google)\.")


def normalize_model_name(model_name: str) -> str:
    """The table's spelling of a model name (see the module docstring)."""
    name = model_name.strip().lower()
    name = name.rsplit("/", 1)[-1]  # openai/gpt-4o, models/gemini-2.5-pro, vertex_ai/...
    name = _BEDROCK_PREFIX.sub("", name)
    name = re.sub(r"-v\d+(:\d+)?$", "", name)  # bedrock's -v1:0
    return name.replace("@", "-")


def _check_tokens(tokens: object, what: str) -> int:
    if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens <= 0:
        raise ValidationError(f"{what} must be a positive integer, got {tokens!r}")
    return tokens


def register_context_window(model_name: str, tokens: int) -> None:
    """Add or correct a model's window for this process (checked before the table)."""
    if not isinstance(model_name, str) or not model_name.strip():
        raise ValidationError(f"model_name must be a non-empty string, got {model_name!r}")
    _overrides[normalize_model_name(model_name)] = _check_tokens(tokens, "tokens")


def forget_context_window(model_name: str) -> None:
    """Drop a process-wide override (the table's value, if any, applies again)."""
    _overrides.pop(normalize_model_name(model_name), None)


def _lookup(name: str, table: Mapping[str, int]) -> int | None:
    if name in table:
        return table[name]
    extended = [known for known in table if name.startswith(known + "-")]
    return table[max(extended, key=len)] if extended else None


def context_window(model_name: str, overrides: Mapping[str, int] | None = None) -> int:
    """The input window of `model_name`: `overrides`, then the process-wide overrides, then
    the shipped table. An unknown model is a ValidationError that says how to fix it."""
    if not isinstance(model_name, str) or not model_name.strip():
        raise ValidationError(f"model_name must be a non-empty string, got {model_name!r}")
    name = normalize_model_name(model_name)
    for table in (
        {normalize_model_name(k): v for k, v in (overrides or {}).items()},
        _overrides,
        KNOWN_CONTEXT_WINDOWS,
    ):
        found = _lookup(name, table)
        if found is not None:
            return found
    raise ValidationError(
        f"model_name {model_name!r} has no known context window: pass max_tokens=..., or "
        f"register_context_window({model_name!r}, tokens)"
    )
