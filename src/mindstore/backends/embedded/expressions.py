"""Aggregation expressions evaluated faster on mongomock, with the same results.

mongomock evaluates an expression (`_Parser.parse`) by testing its operator against a
dozen lists of operator names in turn, and every variable reference (``$$m.id``) by
building a new dict of ``ROOT``, ``CURRENT`` and every user variable before reading
the path out of it; a comparison (`$lt`, ...) goes through its general BSON ordering even
for two numbers. The paged context window (`mindstore.pipelines.context_pages`) and the
analytics pipelines evaluate such expressions for every message of every page:
millions of evaluations in a test over a 2,000-message task in 3-message pages.

Here the same methods, replaced on mongomock's classes once per process (`install`):

* `parse`: the operator found in one dict built from mongomock's lists, in the order the
  original tests them (an operator in two lists goes to the first, as before), its
  handler taken by name from the parser, so a handler wrapped elsewhere
  (`array_ranges`, `array_slices`) is the one called; everything else (the checks, the
  errors and their messages, missing keys, field documents) is the original's code;
* `_parse_basic_expression`: a ``$$name.path`` reads the variable directly (a user
  variable first, then ``ROOT``/``CURRENT``, as the merged dict gave them) and walks the
  rest of the path with mongomock's own loop: the same value, the same `KeyError`
  (arguments included) when something is missing;
* `filtering.bson_compare`: two values of the same type among str, int and float (not
  bool, not a subclass) compared directly, which is what the general code ends in for
  them (same BSON type, not a document, array, null or binary); anything else goes to it.

tests/test_embedded_expressions.py runs the original and these side by side on generated
expressions and documents: same values, same errors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mongomock import OperationFailure
from mongomock import aggregate as _untyped_aggregate
from mongomock import filtering as _untyped_filtering
from mongomock import helpers as _untyped_helpers

from mindstore.backends.embedded.once import once

__all__ = ["ORIGINALS", "handlers", "install"]

_aggregate: Any = _untyped_aggregate
_filtering: Any = _untyped_filtering
_helpers: Any = _untyped_helpers

#: mongomock's operator lists in the order `_Parser.parse` tests them, with the handler
#: each leads to.
_ORDER = (
    ("arithmetic_operators", "_handle_arithmetic_operator"),
    ("project_operators", "_handle_project_operator"),
    ("projection_operators", "_handle_projection_operator"),
    ("comparison_operators", "_handle_comparison_operator"),
    ("date_operators", "_handle_date_operator"),
    ("array_operators", "_handle_array_operator"),
    ("conditional_operators", "_handle_conditional_operator"),
    ("control_flow_operators", "_handle_control_flow_operator"),
    ("set_operators", "_handle_set_operator"),
    ("string_operators", "_handle_string_operator"),
    ("type_convertion_operators", "_handle_type_convertion_operator"),
    ("type_operators", "_handle_type_operator"),
    ("boolean_operators", "_handle_boolean_operator"),
)
#: Types whose values the BSON comparison of two of them compares directly.
_PLAIN_ORDERED: frozenset[type] = frozenset({str, int, float})


ORIGINALS: dict[str, Any] = {
    "parse": _aggregate._Parser.parse,
    "_parse_basic_expression": _aggregate._Parser._parse_basic_expression,
    "bson_compare": _filtering.bson_compare,
}
"""mongomock's own functions, as they were before `install` (the tests compare)."""


def handlers() -> dict[str, str]:
    """Operator -> the name of the `_Parser` method that evaluates it (the first list that
    names it wins, as in `_Parser.parse`)."""
    found: dict[str, str] = {}
    for names, handler in _ORDER:
        for name in getattr(_aggregate, names):
            found.setdefault(name, handler)
    return found


def _walk(result: Any, key_items: list[str], start: int) -> Any:
    """mongomock's `helpers.get_value_by_dot` loop from `key_items[start]` on, `result`
    being what the items before it led to (so a `KeyError` carries the same index)."""
    for key_index in range(start, len(key_items)):
        key_item = key_items[key_index]
        if isinstance(result, dict):
            result = result[key_item]
        elif isinstance(result, (list, tuple)):
            try:
                int_key = int(key_item)
            except ValueError:
                remaining_key = ".".join(key_items[key_index:])
                return [_helpers.get_value_by_dot(subdoc, remaining_key) for subdoc in result]
            try:
                result = result[int_key]
            except (ValueError, IndexError) as err:
                raise KeyError(key_index) from err
        else:
            raise KeyError(key_index)
    return result


def _make_parse(table: dict[str, str], unsupported: frozenset[str]) -> Callable[..., Any]:
    def parse(self: Any, expression: Any) -> Any:
        """Parse a MongoDB expression."""
        if not isinstance(expression, dict):
            return self._parse_basic_expression(expression)
        if len(expression) > 1 and any(key.startswith("$") for key in expression):
            raise OperationFailure(
                "an expression specification must contain exactly one field, "
                f"the name of the expression. Found {len(expression)} fields in {expression}"
            )
        value_dict = {}
        for k, v in expression.items():
            handler = table.get(k)
            if handler is not None:
                return getattr(self, handler)(k, v)
            if k in unsupported:
                raise NotImplementedError(
                    f"'{k}' is a valid operation but it is not supported by Mongomock yet."
                )
            if k.startswith("$"):
                raise OperationFailure(f"Unrecognized expression '{k}'")
            try:
                value = self.parse(v)
            except KeyError:
                if self._ignore_missing_keys:
                    continue
                raise
            value_dict[k] = value
        return value_dict

    return parse


def _parse_basic_expression(self: Any, expression: Any) -> Any:
    if isinstance(expression, str) and expression.startswith("$"):
        if expression.startswith("$$"):
            key_items = expression[2:].split(".")
            name = key_items[0]
            user_vars = self._user_vars
            if name in user_vars:
                result = user_vars[name]
            elif name == "ROOT" or name == "CURRENT":
                result = self._doc_dict
            else:
                raise KeyError(name)
            return _walk(result, key_items, 1)
        return _helpers.get_value_by_dot(self._doc_dict, expression[1:], can_generate_array=True)
    return expression


def _make_compare(general: Callable[..., bool]) -> Callable[..., bool]:
    def bson_compare(
        op: Callable[[Any, Any], bool], a: Any, b: Any, can_compare_types: bool = True
    ) -> bool:
        kind = type(a)
        if kind is type(b) and kind in _PLAIN_ORDERED:
            return op(a, b)
        return general(op, a, b, can_compare_types)

    return bson_compare


@once
def install() -> None:
    """Replace `_Parser.parse`, `_Parser._parse_basic_expression` and
    `filtering.bson_compare` (once per process)."""
    parser = _aggregate._Parser
    unsupported = frozenset(
        _aggregate.text_search_operators
        + _aggregate.projection_operators
        + _aggregate.object_operators
    )
    parser.parse = _make_parse(handlers(), unsupported)
    parser._parse_basic_expression = _parse_basic_expression
    _filtering.bson_compare = _make_compare(ORIGINALS["bson_compare"])
