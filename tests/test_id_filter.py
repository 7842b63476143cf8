"""The sealed-id filter (model/id_filter.py) and `$bitsAllSet` on the embedded backend."""

from __future__ import annotations

import pytest
from bson.binary import Binary
from hypothesis import given, settings
from hypothesis import strategies as st
from mongomock import OperationFailure

from mindstore.backends.embedded.bit_queries import bits_all_set
from mindstore.model import id_filter
from mindstore.store import Store

IDS = st.text(st.characters(codec="ascii", categories=("L", "N")), min_size=1, max_size=24)


@given(st.lists(IDS, max_size=300, unique=True), st.integers(0, 5000))
def test_every_added_id_may_be_held(ids: list[str], count: int) -> None:
    words = id_filter.build(count, ids)
    assert len(words) == id_filter.words_for(count)
    assert all(0 <= word < 2**63 for word in words)  # a non-negative int64 mask
    assert all(id_filter.may_hold(words, i) for i in ids)


@given(st.lists(IDS, min_size=1, max_size=50, unique=True))
def test_adding_sends_only_the_words_its_ids_touch(ids: list[str]) -> None:
    words = id_filter.build(2000, [])
    changed = id_filter.add(words, ids)
    assert 1 <= len(changed) <= len(ids)
    for index, word in changed.items():
        words[index] = word
    assert all(id_filter.may_hold(words, i) for i in ids)
    assert id_filter.add(words, ids) == {}  # adding them again changes nothing


def test_a_full_filter_answers_maybe_for_few_fresh_ids() -> None:
    count = 4096  # exactly the capacity of its size
    words = id_filter.build(count, (f"sealed-{n}" for n in range(count)))
    fresh = [f"fresh-{n}" for n in range(20_000)]
    rate = sum(id_filter.may_hold(words, i) for i in fresh) / len(fresh)
    assert rate < 0.01, rate  # a false positive costs one page lookup, never a wrong answer


def test_sizes_double_with_the_history_and_stop_at_the_limit() -> None:
    assert id_filter.words_for(0) == id_filter.words_for(id_filter.MIN_CAPACITY)
    assert id_filter.words_for(id_filter.MIN_CAPACITY + 1) == 2 * id_filter.words_for(0)
    assert id_filter.words_for(10**9) == id_filter.MAX_WORDS
    small = id_filter.build(10, ["a"])
    assert not id_filter.needs_rebuild(small, id_filter.MIN_CAPACITY)
    assert id_filter.needs_rebuild(small, id_filter.MIN_CAPACITY + 1)
    assert id_filter.needs_rebuild(None, 1) and id_filter.needs_rebuild([-1], 1)
    assert id_filter.needs_rebuild([2**63], 1) and id_filter.needs_rebuild([b"x"], 1)  # type: ignore[list-item]
    full = [0] * id_filter.MAX_WORDS
    assert not id_filter.needs_rebuild(full, 10**9)  # the limit: the rate rises instead


def test_the_guard_names_one_word_per_id() -> None:
    clauses = id_filter.guard(24, ["a", "b"])
    assert len(clauses) == 2
    for clause, message_id in zip(clauses, ["a", "b"], strict=True):
        probe = id_filter.probe(message_id, 24)
        assert clause == {f"id_filter.{probe.word}": {"$not": {"$bitsAllSet": probe.mask}}}
        assert bin(probe.mask).count("1") <= id_filter.HASHES and probe.mask < 2**63


# ------------------------------------------------------------------ $bitsAllSet semantics
@pytest.mark.parametrize(
    ("value", "operand", "expected"),
    [  # the MongoDB manual's examples: a = 54, 20, 20.0, BinData "Zg==" (0x66)
        (54, [1, 5], True),
        (20, [1, 5], False),
        (20.0, [1, 5], False),
        (Binary(b"\x66"), [1, 5], True),
        (54, 50, True),  # mask 50 = positions 1, 4, 5
        (20, 50, False),
        (Binary(b"\x66"), Binary(b"\x22"), True),
        (-5, [200], True),  # numbers are sign-extended
        (5, [200], False),
        (b"\xff", [8], False),  # BinData is zero-extended
        (20.5, [2], False),  # not an integer: never matches
        ("54", [1], False),  # not a number or BinData
        (True, [0], False),
        (2**63, [0], False),  # does not fit a signed 64-bit integer
    ],
)
def test_bits_all_set_follows_mongodb(value: object, operand: object, expected: bool) -> None:
    assert bits_all_set(value, operand) is expected


@pytest.mark.parametrize("operand", [[-1], ["1"], [1.5], -3, "x", [True]])
def test_bad_bit_operands_are_errors(operand: object) -> None:
    with pytest.raises(OperationFailure):
        bits_all_set(5, operand)


async def test_queries_and_guarded_updates_evaluate_it(store: Store) -> None:
    collection = store.database["bits"]
    await collection.insert_many([
        {"_id": 1, "tenant": "t", "a": 54}, {"_id": 2, "tenant": "t", "a": 20},
        {"_id": 3, "tenant": "t", "a": [Binary(b"\x00"), Binary(b"\x66")]},
        {"_id": 4, "tenant": "t"},
    ])  # fmt: skip
    found = await collection.find({"a": {"$bitsAllSet": [1, 5]}}).to_list(length=None)
    assert sorted(d["_id"] for d in found) == [1, 3]
    others = await collection.find({"a": {"$not": {"$bitsAllSet": [1, 5]}}}).to_list(length=None)
    assert sorted(d["_id"] for d in others) == [2, 4]  # a missing field passes `$not`
    refused = await collection.update_one(
        {"_id": 3, "tenant": "t", "a.1": {"$not": {"$bitsAllSet": [1, 5]}}}, {"$set": {"x": 1}}
    )
    passed = await collection.update_one(
        {"_id": 3, "tenant": "t", "$and": [{"a.1": {"$not": {"$bitsAllSet": [0]}}},
                                          {"a.0": {"$not": {"$bitsAllSet": [0]}}}]},
        {"$set": {"x": 2}},
    )  # fmt: skip
    assert (refused.matched_count, passed.matched_count) == (0, 1)
    assert (await collection.find_one({"_id": 3}))["x"] == 2


@pytest.mark.parametrize("fast", [True, False])
async def test_both_update_paths_agree_on_the_filter_clauses(store: Store, fast: bool) -> None:
    """The embedded backend's in-place update path and mongomock's general one."""
    client = store.backend.client
    if not hasattr(client, "fast_updates"):
        pytest.skip("an embedded-backend path")
    client.fast_updates = fast
    words = id_filter.build(100, ["sealed"])
    collection = store.database["filters"]
    await collection.insert_one({"_id": "k", "tenant": "t", "id_filter": words, "n": 0})
    outcomes = []
    for message_id in ("sealed", "fresh"):
        clauses = id_filter.guard(len(words), [message_id])
        result = await collection.update_one(
            {"_id": "k", "tenant": "t", **clauses[0]}, {"$inc": {"n": 1}}
        )
        outcomes.append(result.matched_count)
    both = id_filter.guard(len(words), ["fresh", "other"])
    result = await collection.update_one({"_id": "k", "tenant": "t", "$and": both},
                                         {"$inc": {"n": 1}})  # fmt: skip
    outcomes.append(result.matched_count)
    assert outcomes == [0, 1, int(not id_filter.may_hold(words, "other"))]


@settings(max_examples=30, deadline=None)
@given(st.integers(min_value=-(2**63), max_value=2**63 - 1), st.lists(st.integers(0, 70)))
def test_numbers_agree_with_python_twos_complement(value: int, positions: list[int]) -> None:
    assert bits_all_set(value, positions) == all(value >> p & 1 for p in positions)
