"""Shape checks for incoming payloads, with errors that name the offending path.

Payloads come from provider SDKs, JSON files and other frameworks' session stores. A
malformed one must fail before anything is stored, with a `ValidationError` whose message
says where (`messages[3].content[0].source`), so the caller can find the bad element.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mindstore.errors import ValidationError
from mindstore.ids import is_name


def shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def fail(path: str, problem: str) -> ValidationError:
    return ValidationError(f"{path}: {problem}")


def as_dict(value: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise fail(path, f"expected an object, got {shown(value)}")
    return value


def as_list(value: Any, path: str) -> list[Any]:
    if not isinstance(value, (list, tuple)):
        raise fail(path, f"expected a list, got {shown(value)}")
    return list(value)


def as_str(value: Any, path: str, *, empty: bool = True) -> str:
    if not isinstance(value, str) or (not empty and not value):
        raise fail(path, f"expected {'a' if empty else 'a non-empty'} string, got {shown(value)}")
    return value


def as_bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise fail(path, f"expected true or false, got {shown(value)}")
    return value


def as_name(value: Any, path: str) -> str:
    """An id that will be stored as a message or tool-call id (the name alphabet)."""
    if not is_name(value):
        raise fail(
            path,
            "expected an id of 1-128 printable characters not starting with '$', "
            f"got {shown(value)}",
        )
    return str(value)


def as_args(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise fail(path, f"expected the tool arguments as an object, got {shown(value)}")
    return dict(value)


def as_int(value: Any, path: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise fail(path, f"expected an integer, got {shown(value)}")
    return value
