"""Argument blocks shared by both homes of a verb (the in-memory `Task` and the store).

The tool-result block (observer results, flags, contents, error, timestamp, ids, metadata)
belongs to `add_tool_result_message` and `answer_tool_call` in both homes; written out
four times it drifted (the store grew `terminate` and `metadata`, the in-memory Task did
not). Here it is one frozen spec, built by one function from the caller's positional and
keyword arguments, checked once, and handed to the planner whole.

The Mind Map's spellings are accepted as aliases of the one canonical keyword (see
docs/contract.md): `id` for `message_id`, `payloadKey` for `payload_key`,
`since_message_id` for `since_id`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from mindstore.errors import ValidationError, WrongType
from mindstore.ids import check_name
from mindstore.model.base import JSON
from mindstore.model.parts import ObserverResult, ToolResultContent
from mindstore.validation import (
    check_bool,
    check_optional_json,
    check_optional_text,
    check_timestamp,
)


class ToolResultOptions(TypedDict, total=False):
    """The keywords of the tool-result block (all optional)."""

    observer_results: Sequence[ObserverResult] | None
    is_error: bool
    is_approved: bool
    tool_result_contents: Sequence[ToolResultContent] | None
    error_message: str | None
    is_loading: bool
    has_feedback: bool
    timestamp: float | None
    message_id: str | None
    terminate: bool
    metadata: JSON | None
    id: str | None


TOOL_RESULT_ORDER = (
    "observer_results", "is_error", "is_approved", "tool_result_contents", "error_message",
    "is_loading", "has_feedback", "timestamp", "message_id", "terminate", "metadata",
)  # fmt: skip
"""Positional order after the result: the Mind Map's, then mindstore's additions."""


@dataclass(frozen=True)
class ToolResultSpec:
    """Everything about a tool result except the call it answers and its value."""

    observer_results: tuple[ObserverResult, ...] = ()
    is_error: bool = False
    is_approved: bool = True
    tool_result_contents: tuple[ToolResultContent, ...] = ()
    error_message: str | None = None
    is_loading: bool = False
    has_feedback: bool = False
    timestamp: float | None = None
    message_id: str | None = None
    terminate: bool = False
    metadata: JSON = field(default_factory=dict)

    @classmethod
    def from_call(cls, args: Sequence[Any], options: dict[str, Any]) -> ToolResultSpec:
        """The spec from a verb's extra positional arguments and keywords, checked."""
        if len(args) > len(TOOL_RESULT_ORDER):
            raise WrongType(f"too many positional arguments: {len(args)} after the result")
        values: dict[str, Any] = dict(zip(TOOL_RESULT_ORDER, args))
        options = dict(options)
        alias = options.pop("id", None)
        for name, value in options.items():
            if name not in TOOL_RESULT_ORDER:
                raise WrongType(f"unexpected keyword argument {name!r}")
            if name in values:
                raise WrongType(f"{name} given twice (by position and by keyword)")
            values[name] = value
        values["message_id"] = resolve_alias(values.get("message_id"), alias, "message_id", "id")
        return cls.checked(**values)

    @classmethod
    def checked(cls, **values: Any) -> ToolResultSpec:
        observers = values.get("observer_results") or ()
        contents = values.get("tool_result_contents") or ()
        for name, items, kind in (("observer_results", observers, ObserverResult),
                                  ("tool_result_contents", contents, ToolResultContent)):  # fmt: skip
            if isinstance(items, (str, bytes, dict)) or not isinstance(items, Sequence):
                raise WrongType(f"{name} must be a list of {kind.__name__}")
            for item in items:
                if not isinstance(item, kind):
                    raise WrongType(f"{name} must hold {kind.__name__}, got {type(item).__name__}")
        for flag in ("is_error", "is_approved", "is_loading", "has_feedback", "terminate"):
            if flag in values:
                check_bool(values[flag], flag)
        check_optional_text(values.get("error_message"), "error_message")
        check_timestamp(values.get("timestamp"))
        if values.get("message_id") is not None:
            check_name(values["message_id"], "message_id")
        metadata = check_optional_json(values.get("metadata"), "metadata") or {}
        return cls(**{**values, "observer_results": tuple(observers),
                      "tool_result_contents": tuple(contents), "metadata": dict(metadata)})  # fmt: skip


def resolve_alias(canonical: Any, alias: Any, canonical_name: str, alias_name: str,
                  default: Any = None) -> Any:  # fmt: skip
    """One value from a keyword and its Mind Map alias (a canonical value equal to its
    default counts as not given); both given and different is an error."""
    if alias is None:
        return canonical
    if canonical is not None and canonical != default and canonical != alias:
        raise ValidationError(f"{canonical_name} and its alias {alias_name} disagree")
    return alias
