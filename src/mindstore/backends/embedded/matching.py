"""mongomock's query matcher with its per-field work done once, not once per candidate.

mongomock matches a filter field (``{"messages.id": {"$nin": ids}}``) by walking every
value the path reaches in the document (every message's id) and, for each, checking the
operators anew: whether all the keys are operators, the set of unknown operators, each
operator's function looked up; `$in` and `$nin` test every listed value for being a
regular expression and search the list linearly. mindstore's guards and exactly-once
checks name message ids in documents that hold hundreds of messages, so that work runs
millions of times in the test suite.

Here (`install`, once per process, on mongomock's classes and module):

* `_Filterer.apply` is mongomock's own function with what depends only on the filter field
  (the operator checks, their errors, `$options` folded into `$regex`, the functions) done
  at the first value the path reaches instead of at each, in the same order, so a field
  that reaches no value still raises nothing; a `$in` or `$nin` list with no regular
  expression in it is not searched for one at every value (mongomock's `_in_op` did), and
  one of 8 or more values, only str, int, float, bool, None or ObjectId (exact types:
  equal values hash alike), finds a value of those types in a set, and any other value in
  the list, as before;
* `_iter_key_candidates_sublist` (the values a path reaches inside an array) for a last
  path component that is not an array index: one list comprehension with the same result
  as the per-element recursion.

Everything else runs mongomock's code. tests/test_embedded_matching.py compares the two on
generated filters and documents: the same answers and the same errors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bson import ObjectId
from mongomock import OperationFailure
from mongomock import filtering as _untyped_filtering

from mindstore.backends.embedded.once import once

__all__ = ["ORIGINALS", "install"]

_filtering: Any = _untyped_filtering
NOTHING: Any = _filtering.NOTHING  # a missing value (mongomock's sentinel)
_RE_TYPES: Any = _filtering._RE_TYPES

#: `$in` values found through a set: exact types whose equal values have equal hashes.
_HASHED: frozenset[type] = frozenset({str, int, float, bool, type(None), ObjectId})
_NEGATIVE = frozenset({"$ne", "$nin"})


Check = Callable[[Any, Any], Any]
_SET_FROM = 8  # a `$in` list this long or longer is looked up through a set


def _listed_in(doc_val: Any, values: list[Any] | tuple[Any, ...]) -> bool:
    """mongomock's `_in_op` for a list that holds no regular expression (without testing
    each value of the list for one at every call)."""
    if doc_val is NOTHING and None in values:
        return True
    if not isinstance(doc_val, (list, tuple)):
        return doc_val in values
    return any(x in values for x in doc_val)


def _not_listed_in(doc_val: Any, values: list[Any] | tuple[Any, ...]) -> bool:
    return not _listed_in(doc_val, values)


_made: tuple[Any, bool, Check | None] = ((), False, None)
"""The last list `_fast_in` made a check for, whether negated, and the check: a find
tests every candidate document against the same filter objects, so a `$in` of thousands
of values (a search's tables, by ordinal) is scanned and hashed once per find, not once
per document (which made a million-message search's read of its tables take some 30 s).
The list itself is held, so an identical `id` cannot be another list's."""


def _fast_in(values: list[Any] | tuple[Any, ...], negated: bool) -> Check | None:
    """`_check_in`, once per list object (`_made`)."""
    global _made
    held, was_negated, check = _made
    if held is values and was_negated == negated:
        return check
    check = _check_in(values, negated)
    _made = (values, negated, check)
    return check


def _check_in(values: list[Any] | tuple[Any, ...], negated: bool) -> Check | None:
    """mongomock's `_in_op(doc_val, values)` (negated for `$nin`), or None when a value of
    the list is a regular expression. From `_SET_FROM` values of the `_HASHED` types, the
    values are looked up through a set."""
    if any(isinstance(value, _RE_TYPES) for value in values):
        return None
    if len(values) < _SET_FROM or not all(type(value) in _HASHED for value in values):
        return _not_listed_in if negated else _listed_in
    lookup = frozenset(values)
    has_none = None in lookup

    def test(doc_val: Any, _values: Any) -> bool:
        if doc_val is NOTHING and has_none:
            return True
        if not isinstance(doc_val, (list, tuple)):
            doc_val = [doc_val]
        for item in doc_val:
            if type(item) in _HASHED:
                if item in lookup:
                    return True
            elif item in values:
                return True
        return False

    return _negated(test) if negated else test


def _negated(test: Check) -> Check:
    def negated(doc_val: Any, search_val: Any) -> bool:
        return not test(doc_val, search_val)

    return negated


def _tests(
    matcher: Any, search: dict[str, Any], plain_in: Any, plain_nin: Any
) -> tuple[dict[str, Any], list[tuple[Check | None, Any]]]:
    """The checks mongomock makes of an operator field at each candidate, made once: the
    (possibly `$options`-folded) field and, per operator in order, its function and
    argument (None: `$not`, which `_passes` asks the matcher)."""
    operator_map = matcher._operator_map
    if "$options" in search and "$regex" in search:
        search = _filtering._combine_regex_options(search)
    unknown_operators = set(search) - set(operator_map) - {"$not"}
    if unknown_operators:
        not_implemented_operators = unknown_operators & _filtering._NOT_IMPLEMENTED_OPERATORS
        if not_implemented_operators:
            raise NotImplementedError(
                f"'{next(iter(not_implemented_operators))}' is a valid operation but it is "
                "not supported by Mongomock yet."
            )
        raise OperationFailure("unknown operator: " + next(iter(unknown_operators)))
    tests: list[tuple[Check | None, Any]] = []
    for operator_string, search_val in search.items():
        function = operator_map.get(operator_string)
        if function is None:  # `$not` (not in the map: checked above)
            tests.append((None, search_val))
            continue
        fast = None
        if isinstance(search_val, (list, tuple)) and (
            (operator_string == "$in" and function is plain_in)
            or (operator_string == "$nin" and function is plain_nin)
        ):
            fast = _fast_in(search_val, negated=operator_string == "$nin")
        tests.append((function if fast is None else fast, search_val))
    return search, tests


def _passes(
    matcher: Any, document: Any, key: str, tests: list[tuple[Check | None, Any]], doc_val: Any
) -> bool:
    """mongomock's ``all(...)`` over a field's operators for one value, in order."""
    for function, search_val in tests:
        if function is None:
            if not matcher._not_op(document, key, search_val):  # mongomock's $not
                return False
        elif not function(doc_val, search_val):
            return False
    return True


def _make_apply(plain_in: Any, plain_nin: Any) -> Callable[..., bool]:
    logical = _filtering.LOGICAL_OPERATOR_MAP
    top_level = _filtering._TOP_LEVEL_OPERATORS
    re_types = _filtering._RE_TYPES
    iter_key_candidates = _filtering.iter_key_candidates  # looked up once: not replaced

    def apply(self: Any, search_filter: Any, document: Any) -> bool:
        if not isinstance(search_filter, dict):
            raise OperationFailure("the match filter must be an expression in an object")
        if "$not" in self._operator_map:  # a matcher someone taught `$not`: theirs
            return bool(_ORIGINAL_APPLY(self, search_filter, document))

        for key, search in search_filter.items():
            # Top level operators.
            if key == "$comment":
                continue
            if key in logical:
                if not search:
                    raise OperationFailure("BadValue $and/$or/$nor must be a nonempty array")
                if not logical[key](document, search, self.apply):
                    return False
                continue
            if key == "$expr":
                parse_expression = self.parse_expression[0]
                if not parse_expression(search, document, ignore_missing_keys=True):
                    return False
                continue
            if key in top_level:
                raise NotImplementedError(f"The {key} operator is not implemented in mongomock yet")
            if key.startswith("$"):
                raise OperationFailure("unknown top level operator: " + key)

            is_match: Any = False
            search_is_dict = isinstance(search, dict)
            is_checking_negative_match = search_is_dict and _NEGATIVE & set(search.keys())
            is_checking_positive_match = not search_is_dict or (set(search.keys()) - _NEGATIVE)
            has_candidates = False

            if search == {"$exists": False} and not iter_key_candidates(key, document):
                continue

            if search_is_dict and "$all" in search:
                if not self._all_op(iter_key_candidates(key, document), search["$all"]):
                    return False
                # if there are no query operators then continue
                if len(search) == 1:
                    continue

            first = True
            is_ops_filter: Any = False
            tests: list[tuple[Check | None, Any]] = []
            for doc_val in iter_key_candidates(key, document):
                has_candidates |= doc_val is not NOTHING
                if first:
                    first = False
                    is_ops_filter = (
                        search and search_is_dict and all(k.startswith("$") for k in search)
                    )
                    if is_ops_filter:
                        search, tests = _tests(self, search, plain_in, plain_nin)
                if is_ops_filter:
                    is_match = _passes(self, document, key, tests, doc_val) and search
                elif isinstance(search, re_types) and isinstance(doc_val, (str, list)):
                    is_match = _filtering._regex(doc_val, search)
                elif isinstance(doc_val, (list, tuple)):
                    is_match = search in doc_val or search == doc_val
                    if isinstance(search, ObjectId):
                        is_match |= str(search) in doc_val
                else:
                    is_match = (doc_val == search) or (search is None and doc_val is NOTHING)

                # When checking negative match, all the elements should match.
                if is_checking_negative_match and not is_match:
                    return False

                # If not checking negative matches, the first match is enough.
                if is_match and not is_checking_negative_match:
                    break

            if not is_match and (has_candidates or is_checking_positive_match):
                return False

        return True

    return apply


def _make_sublist(original: Callable[[str, Any], Any]) -> Callable[[str, Any], Any]:
    def _iter_key_candidates_sublist(key: str, doc: Any) -> Any:
        if "." in key:
            return original(key, doc)
        try:
            int(key)
        except ValueError:
            # iter_key_candidates("", value) is [value]: each dict's value, or NOTHING
            return [sub_doc.get(key, NOTHING) for sub_doc in doc if isinstance(sub_doc, dict)]
        return original(key, doc)

    return _iter_key_candidates_sublist


_ORIGINAL_APPLY: Callable[..., Any] = _filtering._Filterer.apply
ORIGINALS: dict[str, Any] = {
    "apply": _filtering._Filterer.apply,
    "_iter_key_candidates_sublist": _filtering._iter_key_candidates_sublist,
}
"""mongomock's own functions, as they were before `install` (the tests compare)."""


@once
def install() -> None:
    """Replace `_Filterer.apply` and `_iter_key_candidates_sublist` (once per process)."""
    operator_map = _filtering._filterer_inst._operator_map
    _filtering._Filterer.apply = _make_apply(operator_map["$in"], operator_map["$nin"])
    _filtering._iter_key_candidates_sublist = _make_sublist(
        ORIGINALS["_iter_key_candidates_sublist"]
    )
