"""`$bitsAllSet`, which mongomock lists as not implemented, with MongoDB's semantics.

mindstore's exactly-once guard over sealed pages tests a task's filter of sealed message
ids with ``{"id_filter": {"$not": {"$bitsAllSet": [positions]}}}`` (`model/id_filter.py`).
MongoDB's rules, as its manual gives them:

* the field must be a number or BinData, else the operator does not match; a number
  must be integral and fit in a signed 64-bit integer (then it is sign-extended), BinData
  is an unsigned little-endian number of any length (zero-extended);
* the operand is a list of non-negative bit positions, a non-negative 64-bit integer mask,
  or a BinData mask; anything else is an error.

`install()` registers it with mongomock's matcher (idempotent); `bits_all_set` is the
pure test, which the fast update path calls directly.
"""

from __future__ import annotations

from typing import Any

from bson.binary import Binary
from bson.int64 import Int64
from mongomock import OperationFailure
from mongomock import filtering as _untyped_filtering

__all__ = ["bits_all_set", "install"]

_filtering: Any = _untyped_filtering
_INT64 = 2**63


def _as_int(value: Any) -> int | None:
    """The field value as MongoDB's bit operators read it (a Python int), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (bytes, Binary)):
        return int.from_bytes(bytes(value), "little")
    if isinstance(value, (int, Int64)):
        return int(value) if -_INT64 <= int(value) < _INT64 else None
    if isinstance(value, float) and value.is_integer() and -_INT64 <= value < _INT64:
        return int(value)
    return None


def _mask(operand: Any) -> int:
    """The operand as a bit mask (positions, a number or BinData); bad operands raise."""
    if isinstance(operand, list):
        mask = 0
        for position in operand:
            if isinstance(position, bool) or not isinstance(position, (int, Int64)):
                raise OperationFailure("bit positions must be integers")
            if position < 0:
                raise OperationFailure("bit positions must be >= 0")
            mask |= 1 << int(position)
        return mask
    if isinstance(operand, (bytes, Binary)):
        return int.from_bytes(bytes(operand), "little")
    if isinstance(operand, (int, Int64)) and not isinstance(operand, bool) and operand >= 0:
        return int(operand)
    raise OperationFailure("$bitsAllSet takes a bit position list, a mask or BinData")


def bits_all_set(value: Any, operand: Any) -> bool:
    """MongoDB's `{field: {$bitsAllSet: operand}}` for one field value (a negative number
    is sign-extended: Python's infinite two's complement does exactly that; an array
    matches when one of its elements does, as for every leaf operator)."""
    mask = _mask(operand)
    if isinstance(value, list):
        return any(bits_all_set(item, operand) for item in value if not isinstance(item, list))
    number = _as_int(value)
    return number is not None and number & mask == mask


def install() -> None:
    """Make mongomock's matcher know `$bitsAllSet` (once per process)."""
    matcher = _filtering._filterer_inst
    if "$bitsAllSet" not in matcher._operator_map:
        matcher._operator_map["$bitsAllSet"] = lambda doc_value, operand: bits_all_set(
            doc_value, operand
        )
        _filtering._NOT_IMPLEMENTED_OPERATORS.discard("$bitsAllSet")
