"""The 32-bit integer arguments MongoDB's array expressions take (`$range`, `$slice`).

A server refuses a non-numeric argument, a fraction, and a number outside the signed
32-bit range; the embedded backend's implementations of those operators refuse the same,
with `OperationFailure` as a server's error arrives.
"""

from __future__ import annotations

from typing import Any

from mongomock import OperationFailure

__all__ = ["int32"]

_INT32 = 2**31


def int32(value: Any, operator: str, what: str) -> int:
    """`value` as the integer `operator`'s `what` argument stands for, or `OperationFailure`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise OperationFailure(
            f"{operator}: the {what} must be numeric, found {type(value).__name__}"
        )
    if isinstance(value, float) and not value.is_integer():
        raise OperationFailure(f"{operator}: the {what} must be a 32-bit integer, got {value}")
    number = int(value)
    if not -_INT32 <= number < _INT32:
        raise OperationFailure(f"{operator}: the {what} must be a 32-bit integer, got {value}")
    return number
