"""Argument checks for every public entry point: typed errors that name the argument.

Each check either returns the value (normalised where that is harmless, e.g. a state name
to its enum value) or raises `ValidationError` naming the argument, before anything is
written. They are pure and cheap, so verbs run them all up front: a bad argument never
costs a round trip and never leaves half a write behind.

Limits (docs/data-model.md lists them for callers):

* integers that count or index (limits, starts, `last_n`): ``0 <= n <= MAX_COUNT``;
* timestamps: finite epoch seconds between 0 and `MAX_TIMESTAMP` (year 9999);
* token counts: integers ``0 <= n <= MAX_COUNT``; cost: a finite number ``>= 0``;
* titles: at most `MAX_TITLE_CHARS`; JSON metadata: a dict with string keys, at most
  `MAX_METADATA_BYTES` encoded;
* every string: encodable as UTF-8 (no lone surrogates), as MongoDB requires.
"""

from __future__ import annotations

import math
from datetime import datetime
from enum import Enum
from typing import Any, TypeVar

import bson

from mindstore.errors import ValidationError, WrongType
from mindstore.ids import check_name

MAX_COUNT = 2**53
"""Counts and indexes: far above any real history, safely inside int64 and a float."""
MAX_TIMESTAMP = 253_402_300_799.0
"""9999-12-31T23:59:59Z in epoch seconds: the last instant a datetime can hold."""
MAX_TITLE_CHARS = 4096
MAX_METADATA_BYTES = 64 * 1024

E = TypeVar("E", bound=Enum)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_int(
    value: Any, name: str, *, minimum: int = 0, maximum: int = MAX_COUNT
) -> int:
    """An integer (not a bool, not a float) in [minimum, maximum]."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise WrongType(f"{name} must be an integer, got {_shown(value)}")
    if not minimum <= value <= maximum:
        raise ValidationError(f"{name} must be between {minimum} and {maximum}, got {value}")
    return value


def check_optional_int(value: Any, name: str, *, minimum: int = 0, maximum: int = MAX_COUNT) -> int | None:
    return None if value is None else check_int(value, name, minimum=minimum, maximum=maximum)


def check_number(value: Any, name: str, *, minimum: float = 0.0, maximum: float = math.inf) -> float:
    """A finite real number (int or float, not a bool) in [minimum, maximum]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise WrongType(f"{name} must be a number, got {_shown(value)}")
    try:
        as_float = float(value)
    except OverflowError:
        raise ValidationError(f"{name} is too large: {_shown(value)}") from None
    if not math.isfinite(as_float):
        raise ValidationError(f"{name} must be a finite number, got {value!r}")
    if not minimum <= as_float <= maximum:
        raise ValidationError(f"{name} must be between {minimum} and {maximum}, got {value!r}")
    return value


def check_timestamp(value: Any, name: str = "timestamp") -> float | None:
    """Epoch seconds, or None for "now"."""
    if value is None:
        return None
    return check_number(value, name, minimum=0.0, maximum=MAX_TIMESTAMP)


def check_bool(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise WrongType(f"{name} must be True or False, got {_shown(value)}")
    return value


def check_text(value: Any, name: str, *, max_chars: int | None = None, empty: bool = True) -> str:
    """A string MongoDB can store (valid UTF-8), optionally bounded and non-empty."""
    if not isinstance(value, str):
        raise WrongType(f"{name} must be a string, got {_shown(value)}")
    if not empty and not value:
        raise ValidationError(f"{name} must not be empty")
    if max_chars is not None and len(value) > max_chars:
        raise ValidationError(f"{name} is {len(value)} characters; the limit is {max_chars}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError(f"{name} holds a lone surrogate at position {exc.start}") from None
    return value


def check_optional_text(value: Any, name: str, *, max_chars: int | None = None) -> str | None:
    return None if value is None else check_text(value, name, max_chars=max_chars)


def check_owner(value: Any, name: str = "owner") -> str | None:
    """An owner is a name (see `mindstore.ids`), or None."""
    return None if value is None else check_name(value, name)


def check_json(value: Any, name: str, *, max_bytes: int = MAX_METADATA_BYTES) -> dict[str, Any]:
    """A JSON-like dict with string keys that BSON can encode, within `max_bytes`."""
    if not isinstance(value, dict):
        raise WrongType(f"{name} must be a dict, got {type(value).__name__}")
    try:
        size = len(bson.encode(value))
    except (bson.errors.InvalidDocument, OverflowError, TypeError, UnicodeEncodeError) as exc:
        raise ValidationError(f"{name} cannot be stored: {str(exc)[:120]}") from None
    if size > max_bytes:
        raise ValidationError(f"{name} is {size} bytes encoded; the limit is {max_bytes}")
    return value


def check_optional_json(value: Any, name: str, *, max_bytes: int = MAX_METADATA_BYTES) -> dict[str, Any] | None:
    return None if value is None else check_json(value, name, max_bytes=max_bytes)


def check_enum(value: Any, enum: type[E], name: str) -> E:
    """A member of `enum`, given as the member or its value."""
    if isinstance(value, enum):
        return value
    try:
        return enum(value)
    except (ValueError, TypeError):
        allowed = ", ".join(str(member.value) for member in enum)
        raise ValidationError(f"{name} must be one of {allowed}; got {_shown(value)}") from None


def check_datetime(value: Any, name: str) -> datetime:
    if not isinstance(value, datetime):
        raise WrongType(f"{name} must be a datetime, got {_shown(value)}")
    return value


def check_optional_datetime(value: Any, name: str) -> datetime | None:
    return None if value is None else check_datetime(value, name)


def describe_pydantic(exc: Any) -> str:
    """One line naming the first bad field of a pydantic `ValidationError`."""
    errors = exc.errors() if hasattr(exc, "errors") else []
    if not errors:
        return str(exc).splitlines()[0]
    first = errors[0]
    where = ".".join(str(step) for step in first.get("loc", ())) or "value"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"invalid {where}: {first.get('msg', 'bad value')}{more}"
