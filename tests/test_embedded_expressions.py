"""Aggregation expressions on the embedded backend (backends/embedded/expressions.py): the
same values and the same errors as mongomock's own evaluator, on generated expressions,
documents and variables, and the same BSON comparisons."""

from __future__ import annotations

import contextlib
import datetime as dt
import operator
from collections.abc import Callable, Iterator
from typing import Any

from bson import Int64, ObjectId
from hypothesis import example, given, settings
from hypothesis import strategies as st
from mongomock import aggregate, filtering

from mindstore.backends.embedded import expressions

ORIGINAL = expressions.ORIGINALS


@contextlib.contextmanager
def mongomocks_own() -> Iterator[None]:
    """mongomock's own evaluator for the block (its nested parsers included)."""
    parser = aggregate._Parser
    replaced = (parser.parse, parser._parse_basic_expression, filtering.bson_compare)
    parser.parse = ORIGINAL["parse"]
    parser._parse_basic_expression = ORIGINAL["_parse_basic_expression"]
    filtering.bson_compare = ORIGINAL["bson_compare"]
    try:
        yield
    finally:
        parser.parse, parser._parse_basic_expression, filtering.bson_compare = replaced


def outcome(run: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "value", run()
    except Exception as error:  # the same error, type and arguments
        return type(error).__name__, repr(error.args)


SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from([0.5, -1.0, float("inf")]),
    st.sampled_from(["a", "b", "", "$", "$$"]), st.just(Int64(2)), st.just(ObjectId(b"a" * 12)),
    st.just(dt.datetime(2024, 1, 1)),
)  # fmt: skip
PATHS = st.sampled_from([
    "$a", "$b", "$arr", "$arr.k", "$arr.0", "$arr.9", "$arr.-1", "$doc.x", "$doc.x.y", "$none",
    "$$ROOT", "$$ROOT.a", "$$CURRENT.arr.k", "$$v", "$$v.k", "$$v.0", "$$w", "$$w.k.z",
    "$$missing", "$$missing.x", "$$", "$$ROOT.", "$a.",
])  # fmt: skip


def _expressions(leaf: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    two = st.lists(leaf, min_size=2, max_size=2)
    return st.one_of(
        st.builds(lambda op, args: {op: args},
                  st.sampled_from(["$eq", "$ne", "$lt", "$lte", "$gt", "$gte", "$cmp"]), two),
        st.builds(lambda op, args: {op: args}, st.sampled_from(["$and", "$or"]),
                  st.lists(leaf, max_size=3)),
        st.builds(lambda e: {"$not": [e]}, leaf),
        st.builds(lambda args: {"$cond": args}, st.lists(leaf, min_size=3, max_size=3)),
        st.builds(lambda args: {"$ifNull": args}, two),
        st.builds(lambda e: {"$size": e}, leaf),
        st.builds(lambda args: {"$in": args}, two),
        st.builds(lambda args: {"$add": args}, st.lists(leaf, max_size=3)),
        st.builds(lambda args: {"$concat": args}, st.lists(leaf, max_size=2)),
        st.builds(lambda i, c, name: {"$filter": {"input": i, "as": name, "cond": c}},
                  leaf, leaf, st.sampled_from(["v", "w"])),
        st.builds(lambda i, e: {"$map": {"input": i, "as": "v", "in": e}}, leaf, leaf),
        st.builds(lambda v, e: {"$let": {"vars": {"w": v}, "in": e}}, leaf, leaf),
        st.builds(lambda e: {"$literal": e}, leaf),
        st.builds(lambda a, b: {"x": a, "y": b}, leaf, leaf),
        st.builds(lambda e: {"$eq": e, "x": 1}, leaf),
        st.just({"$badop": 1}),
        st.just({"$text": 1}),
        st.builds(lambda args: {"$slice": args}, st.tuples(leaf, st.integers(-2, 2)).map(list)),
    )  # fmt: skip


EXPRESSIONS = st.recursive(st.one_of(PATHS, PATHS, SCALARS), _expressions, max_leaves=8)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["k", "x", "y", "z"]), inner, max_size=2),
    ),
    max_leaves=6,
)
DOCUMENTS = st.fixed_dictionaries(
    {}, optional={"a": VALUES, "b": VALUES, "arr": st.lists(VALUES, max_size=3), "doc": VALUES}
)


@settings(max_examples=200, deadline=None)
@given(
    expression=EXPRESSIONS,
    document=DOCUMENTS,
    user_vars=st.dictionaries(st.sampled_from(["v", "w", "ROOT"]), VALUES, max_size=2),
    ignore_missing=st.booleans(),
)
def test_expressions_evaluate_as_mongomocks_own(
    expression: Any, document: dict[str, Any], user_vars: dict[str, Any], ignore_missing: bool
) -> None:
    def run() -> Any:
        return aggregate._Parser(document, user_vars, ignore_missing).parse(expression)

    with mongomocks_own():
        expected = outcome(run)
    assert outcome(run) == expected


@settings(max_examples=200, deadline=None)
@example(path="$$v.0", document={}, user_vars={"v": []})  # past the end: KeyError(1)
@example(path="$$w.k.z", document={}, user_vars={"w": {"k": 1}})  # not a container: KeyError(2)
@example(path="$$CURRENT.a", document={"a": 1}, user_vars={})
@given(
    path=PATHS,
    document=DOCUMENTS,
    user_vars=st.dictionaries(st.sampled_from(["v", "w", "ROOT", "CURRENT"]), VALUES, max_size=2),
)
def test_paths_and_variables_read_as_mongomocks_own(
    path: str, document: dict[str, Any], user_vars: dict[str, Any]
) -> None:
    """A missing value raises the same `KeyError`, its argument included."""

    def run() -> Any:
        return aggregate._Parser(document, user_vars).parse(path)

    with mongomocks_own():
        expected = outcome(run)
    assert outcome(run) == expected


ORDERED = st.one_of(SCALARS, st.lists(SCALARS, max_size=2),
                    st.dictionaries(st.sampled_from("ab"), SCALARS, max_size=2))  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(
    a=ORDERED,
    b=ORDERED,
    op=st.sampled_from([operator.lt, operator.le, operator.gt, operator.ge]),
    types=st.booleans(),
)
def test_comparisons_order_as_mongomocks_own(a: Any, b: Any, op: Any, types: bool) -> None:
    expected = outcome(lambda: ORIGINAL["bson_compare"](op, a, b, types))
    assert outcome(lambda: filtering.bson_compare(op, a, b, types)) == expected
    assert outcome(lambda: filtering.bson_compare(op, a, b)) == outcome(
        lambda: ORIGINAL["bson_compare"](op, a, b)
    )


def test_each_operator_goes_to_the_handler_mongomocks_parser_tests_first() -> None:
    table = expressions.handlers()
    assert table["$slice"] == "_handle_array_operator"
    assert table["$max"] == "_handle_project_operator"
    assert table["$and"] == "_handle_boolean_operator"
    assert table["$lt"] == "_handle_comparison_operator"
    # a handler wrapped after the table was made is the one called (`$range` is ours)
    assert aggregate._Parser({}).parse({"$range": [0, 3]}) == [0, 1, 2]
