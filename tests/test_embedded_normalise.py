"""The embedded backend's document normaliser gives what mongomock's own gives.

`empty_timestamps.normalise` replaces mongomock's `patch_datetime_awareness_in_document`
(every insert, update and filter goes through it) with fewer steps per value; the only
intended difference is that an empty timestamp is kept (as a server keeps one nested in
a document). Here both run on generated values, mongomock's with its recursion coming
back through the same empty-timestamp rule: the same values of the same types."""

from __future__ import annotations

import datetime as dt
from collections import OrderedDict
from typing import Any

import pytest
from bson import Int64, ObjectId
from bson.son import SON
from bson.timestamp import Timestamp
from hypothesis import example, given, settings
from hypothesis import strategies as st
from mongomock import helpers as mongomock_helpers

from mindstore.backends.embedded import empty_timestamps
from mindstore.backends.embedded.empty_timestamps import ORIGINAL, normalise


def _reference(value: Any) -> Any:
    """mongomock's normaliser with an empty timestamp kept (the documented difference)."""
    if isinstance(value, Timestamp) and not value.time and not value.inc:
        return value
    return ORIGINAL(value)


def run_reference(value: Any) -> Any:
    helpers: Any = mongomock_helpers
    installed = helpers.patch_datetime_awareness_in_document
    helpers.patch_datetime_awareness_in_document = _reference  # its recursion comes back here
    try:
        return _reference(value)
    finally:
        helpers.patch_datetime_awareness_in_document = installed


def shape(value: Any) -> Any:
    """The value with every node's exact type (NaN comparable)."""
    if isinstance(value, dict):
        return (type(value), [(k, shape(v)) for k, v in value.items()])
    if isinstance(value, (list, tuple)):
        return (type(value), [shape(v) for v in value])
    if isinstance(value, float):
        return (float, repr(value))
    return (type(value), value)


class Text(str):
    pass


zones = st.sampled_from([None, dt.UTC, dt.timezone(dt.timedelta(hours=5, minutes=30)),
                         dt.timezone(-dt.timedelta(hours=8))])  # fmt: skip
datetimes = st.builds(lambda d, z: d.replace(tzinfo=z), st.datetimes(), zones)
scalars = st.one_of(
    st.text(max_size=4), st.builds(Text, st.text(max_size=3)), st.integers(), st.floats(),
    st.booleans(), st.none(), st.binary(max_size=4), st.builds(Int64, st.integers(-9, 9)),
    st.just(ObjectId("65a1b2c3d4e5f60718293a4b")), datetimes,
    st.sampled_from([Timestamp(0, 0), Timestamp(5, 1), Timestamp(0, 2)]),
)  # fmt: skip
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(st.text(max_size=3), inner, max_size=3),
        st.dictionaries(st.text(max_size=3), inner, max_size=3).map(OrderedDict),
        st.dictionaries(st.text(max_size=3), inner, max_size=3).map(SON),
    ),
    max_leaves=12,
)


@settings(max_examples=100, deadline=None)
@given(values)
@example({"messages": [{"at": dt.datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=dt.UTC),
                        "raw": Timestamp(0, 0), "n": Int64(3)}], "ids": ("a", "b")})  # fmt: skip
def test_values_normalise_as_with_mongomocks_own(value: Any) -> None:
    assert shape(normalise(value)) == shape(run_reference(value))


def test_an_aware_datetime_whose_zone_gives_no_offset_fails_as_in_mongomock() -> None:
    class NoOffset(dt.tzinfo):
        def utcoffset(self, _when: Any) -> None:
            return None

    value = dt.datetime(2026, 1, 1, tzinfo=NoOffset())
    with pytest.raises(TypeError):
        run_reference(value)
    with pytest.raises(TypeError):
        normalise(value)


def test_the_installed_normaliser_is_this_one_and_keeps_empty_timestamps() -> None:
    helpers: Any = mongomock_helpers
    assert helpers.patch_datetime_awareness_in_document is normalise
    empty_timestamps.install()  # again: still this one
    assert helpers.patch_datetime_awareness_in_document is normalise
    stamp = Timestamp(0, 0)
    assert normalise({"a": [stamp]})["a"][0] is stamp
