"""The record codec: any BSON document survives encode -> decode byte for byte."""

from __future__ import annotations

import json

import bson
import pytest
from bson import DBRef, Int64
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mindstore.backup.codec import RecordError, decode_line, encode_line
from test_backup_support import keys, values


def as_stored(document: dict) -> dict:
    """What pymongo hands back for `document` (DBRefs, bytes for subtype 0, ...)."""
    return bson.decode(bson.encode(document))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(keys.filter(lambda k: not k.startswith("$")), values(), max_size=6))
def test_any_document_round_trips_byte_for_byte(fields):
    document = as_stored({"_id": "x", **fields})
    line = encode_line(document)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    json.loads(line)  # plain JSON for any reader
    assert bson.encode(decode_line(line)) == bson.encode(document)


def test_user_keys_that_look_like_extended_json_stay_user_data():
    document = as_stored(
        {
            "_id": "x",
            "schema": {
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "$ref": "#/$defs/a",
                "$defs": {"a": {"type": "object"}},
            },
            "date": {"$date": "not a date"},
            "undefined": {"$undefined": True},
            "number": {"$numberLong": "5"},
            "marker": {"~esc": [["a", 1]]},
            "dbref": {"$ref": "things", "$id": 7, "$db": "other", "note": {"$gt": 1}},
            "int64": Int64(5),
            "int32": 5,
        }
    )
    assert isinstance(document["dbref"], DBRef)
    back = decode_line(encode_line(document))
    assert back == document
    assert type(back["int64"]) is Int64 and type(back["int32"]) is int
    assert bson.encode(back) == bson.encode(document)


def test_canonical_extended_json_is_used():
    line = encode_line(as_stored({"_id": "x", "i": 1, "l": Int64(2), "f": 0.5}))
    assert json.loads(line) == {
        "_id": "x",
        "i": {"$numberInt": "1"},
        "l": {"$numberLong": "2"},
        "f": {"$numberDouble": "0.5"},
    }


@pytest.mark.parametrize(
    "line",
    [
        b"[1, 2]\n",
        b"{not json}\n",
        b'{"a": {"~esc": 5}}\n',
        b'{"a": {"~esc": [["k", 1], ["k", 2]]}}\n',
        b'{"a": {"~esc": [["k", 1]], "b": 2}}\n',
        b'{"a": {"~dbref": [["$id", 1]]}}\n',
        b'{"a": {"$date": "yesterday"}}\n',
        b'{"a": {"$numberInt": "x"}}\n',
        b"\xff\xfe\n",
        b'{"a": {"$numberLong": "9223372036854775808"}}\n',
        b'{"a": {"~f64": "00"}}\n',
    ],
)
def test_bad_lines_are_record_errors(line):
    with pytest.raises(RecordError):
        decode_line(line)


# the stand-alone reader of docs/backup.md, verbatim apart from the file loop
import datetime as _datetime
import struct as _struct

from bson import Decimal128 as _Decimal128
from bson.json_util import CANONICAL_JSON_OPTIONS as _CANONICAL
from bson.json_util import object_hook as _object_hook

_OPTIONS = _CANONICAL.with_options(tz_aware=True, tzinfo=_datetime.UTC)


def _doc_hook(obj):
    if len(obj) == 1:
        ((key, value),) = obj.items()
        if key == "~esc":
            return {k: v for k, v in value}
        if key == "~dbref":
            doc = {k: v for k, v in value}
            return DBRef(doc.pop("$ref"), doc.pop("$id"), doc.pop("$db", None), **doc)
        if key == "~f64":
            return _struct.unpack(">d", bytes.fromhex(value))[0]
        if key == "~d128":
            return _Decimal128.from_bid(bytes.fromhex(value)[::-1])
    return _object_hook(obj, _OPTIONS)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(keys.filter(lambda k: not k.startswith("$")), values(), max_size=6))
def test_the_documented_stand_alone_reader_reads_records_exactly(fields):
    document = as_stored({"_id": "x", **fields})
    line = encode_line(document)
    assert bson.encode(json.loads(line, object_hook=_doc_hook)) == bson.encode(document)
