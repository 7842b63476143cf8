"""One document <-> one line of canonical Extended JSON, losslessly.

Each record is a document converted to MongoDB Extended JSON v2 in *canonical* mode (every
number typed: ``{"$numberInt": "5"}``, ``{"$numberLong": "5"}``, ``{"$numberDouble":
"0.5"}``, ``{"$numberDecimal": "1.10"}``; dates as ``{"$date": {"$numberLong": "<ms>"}}``;
binary as ``{"$binary": {"base64": ..., "subType": "00"}}``; ...), serialised as compact
UTF-8 JSON on one line, ended by ``\\n``.

Four escapes keep every document exact (the format's ``escape: mindstore-escape-1``):

* A mapping that has any key starting with ``$``, or any of the marker keys ``"~esc"``,
  ``"~dbref"``, ``"~f64"``, ``"~d128"``, is written as ``{"~esc": [[key, value], ...]}``
  (pairs in the original key order, values converted recursively). Without it a user's
  ``{"$ref": "#/defs/a"}`` or ``{"$date": "today"}`` would be read back by any Extended
  JSON parser as a DBRef or a date, and ``{"$undefined": true}`` as null.
* A `bson.DBRef` (pymongo decodes any subdocument with a string ``$ref`` and an ``$id`` as
  one) is written as ``{"~dbref": [["$ref", ...], ["$id", ...], (["$db", ...],) extra
  pairs...]}``.
* A double NaN other than the canonical quiet NaN (``0x7ff8000000000000``; e.g. a
  negative NaN) is written as ``{"~f64": "<16 hex digits>"}``: its IEEE 754 bits,
  most significant first. Extended JSON's ``"NaN"`` has no sign or payload.
* A Decimal128 whose ``$numberDecimal`` string would not read back to the same 128 bits
  (NaN payloads, non-canonical encodings) is written as ``{"~d128": "<32 hex digits>"}``,
  its bits most significant first.

A reader turns an object whose *only* key is one of the markers back into the value it
describes, and every other object through the Extended JSON rules. The writer never
produces an unescaped object with a marker key.

`encode_document` is a single recursive pass (escape and Extended JSON conversion
together) with fast paths for the JSON-shaped values messages are made of; uncommon BSON
types go through `bson.json_util.default`. `decode_line` is one `json.loads` with an
object hook: no second walk.
"""

from __future__ import annotations

import calendar
import datetime as _dt
import json
import struct
from collections.abc import Mapping
from typing import Any

from bson import DBRef
from bson.code import Code
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.json_util import CANONICAL_JSON_OPTIONS
from bson.json_util import default as _ejson_default
from bson.json_util import object_hook as _ejson_object_hook

__all__ = [
    "DBREF_KEY",
    "ESCAPE_KEY",
    "RecordError",
    "decode_line",
    "encode_document",
    "encode_line",
    "to_ejson",
]

ESCAPE_KEY = "~esc"
DBREF_KEY = "~dbref"
DOUBLE_KEY = "~f64"
DECIMAL_KEY = "~d128"
_MARKERS = frozenset({ESCAPE_KEY, DBREF_KEY, DOUBLE_KEY, DECIMAL_KEY})
#: The one NaN Extended JSON's "NaN" stands for (little-endian IEEE 754 bits).
_CANONICAL_NAN = struct.pack("<d", float("nan"))

#: How records are read back: canonical rules, datetimes aware in UTC.
LOAD_OPTIONS = CANONICAL_JSON_OPTIONS.with_options(tz_aware=True, tzinfo=_dt.UTC)

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_UTC = _dt.UTC
_SPECIAL_DOUBLES = frozenset({"NaN", "Infinity", "-Infinity", "nan", "inf", "-inf"})


class RecordError(ValueError):
    """A line that is not a valid record."""


def _float(value: float) -> dict[str, str]:
    if value != value:
        bits = struct.pack("<d", value)
        if bits != _CANONICAL_NAN:  # a NaN with a sign or payload: keep its exact bits
            return {DOUBLE_KEY: bits[::-1].hex()}
        return {"$numberDouble": "NaN"}
    if value == float("inf"):
        return {"$numberDouble": "Infinity"}
    if value == float("-inf"):
        return {"$numberDouble": "-Infinity"}
    return {"$numberDouble": repr(value)}


def _datetime(value: _dt.datetime) -> dict[str, Any]:
    if value.tzinfo is not None and value.utcoffset() is not None:
        value = value.astimezone(_UTC)
    millis = calendar.timegm(value.timetuple()) * 1000 + value.microsecond // 1000
    return {"$date": {"$numberLong": str(millis)}}


def to_ejson(value: Any) -> Any:
    """`value` as plain JSON values in canonical Extended JSON, with mindstore's escapes."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return value
    if kind is dict:
        for key in value:
            if key[:1] == "$" or key in _MARKERS:
                return {ESCAPE_KEY: [[k, to_ejson(v)] for k, v in value.items()]}
        return {k: to_ejson(v) for k, v in value.items()}
    if kind is list:
        return [to_ejson(v) for v in value]
    if kind is int:
        if _INT32_MIN <= value <= _INT32_MAX:
            return {"$numberInt": str(value)}
        return {"$numberLong": str(value)}
    if kind is float:
        return _float(value)
    if kind is Int64:
        return {"$numberLong": str(int(value))}
    if kind is _dt.datetime:
        return _datetime(value)
    if isinstance(value, DBRef):
        return {DBREF_KEY: [[k, to_ejson(v)] for k, v in value.as_doc().items()]}
    if kind is Decimal128:
        if Decimal128(str(value)).bid != value.bid:  # NaN payloads, non-canonical encodings
            return {DECIMAL_KEY: value.bid[::-1].hex()}
        return {"$numberDecimal": str(value)}
    if isinstance(value, Code) and value.scope is not None:
        return {"$code": str(value), "$scope": to_ejson(dict(value.scope))}
    if isinstance(value, Mapping):
        return to_ejson(dict(value))
    if isinstance(value, tuple):
        return [to_ejson(v) for v in value]
    if isinstance(value, bool):  # a bool subclass
        return bool(value)
    if isinstance(value, int) and not isinstance(value, Int64):
        return to_ejson(int(value))
    # bytes, Binary, ObjectId, Decimal128, Regex, Timestamp, MinKey, MaxKey, Code, ...
    return _ejson_default(value, CANONICAL_JSON_OPTIONS)


def encode_document(document: Mapping[str, Any]) -> str:
    """One record: the document as one line of JSON (without the newline)."""
    return json.dumps(
        to_ejson(document),
        ensure_ascii=False,
        separators=(",", ":"),
        check_circular=False,
        allow_nan=False,
    )


def encode_line(document: Mapping[str, Any]) -> bytes:
    return (encode_document(document) + "\n").encode("utf-8")


def _pairs(value: Any, marker: str) -> list[tuple[str, Any]]:
    if not isinstance(value, list):
        raise RecordError(f"{marker} must hold a list of [key, value] pairs")
    pairs = []
    for pair in value:
        if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
            raise RecordError(f"{marker} must hold a list of [key, value] pairs")
        pairs.append((pair[0], pair[1]))
    if len({k for k, _ in pairs}) != len(pairs):
        raise RecordError(f"duplicate key in {marker}")
    return pairs


def _hex_bits(value: Any, size: int, marker: str) -> bytes:
    """Big-endian hex (as written) -> the little-endian bytes BSON stores."""
    try:
        raw = bytes.fromhex(value) if isinstance(value, str) else b""
    except ValueError:
        raw = b""
    if len(raw) != size:
        raise RecordError(f"{marker} must hold {size * 2} hex digits")
    return raw[::-1]


def _hook(obj: dict[str, Any]) -> Any:
    if len(obj) == 1:
        # fast paths for the wrappers that make up most of a record
        if "$numberInt" in obj:
            text = obj["$numberInt"]
            if type(text) is str and text.lstrip("-").isdigit():
                number = int(text)
                if _INT32_MIN <= number <= _INT32_MAX:
                    return number
        elif "$numberDouble" in obj:
            text = obj["$numberDouble"]
            if type(text) is str and text not in _SPECIAL_DOUBLES:
                try:
                    return float(text)
                except ValueError:
                    pass
        elif "$numberLong" in obj:
            text = obj["$numberLong"]
            if type(text) is str and text.lstrip("-").isdigit():
                number = int(text)
                if not _INT64_MIN <= number <= _INT64_MAX:
                    raise RecordError(f"$numberLong out of range: {text}")
                return Int64(number)
        if ESCAPE_KEY in obj:
            return dict(_pairs(obj[ESCAPE_KEY], ESCAPE_KEY))
        if DBREF_KEY in obj:
            doc = dict(_pairs(obj[DBREF_KEY], DBREF_KEY))
            if not isinstance(doc.get("$ref"), str) or "$id" not in doc:
                raise RecordError("~dbref needs a string $ref and an $id")
            ref, ident = doc.pop("$ref"), doc.pop("$id")
            return DBRef(ref, ident, doc.pop("$db", None), **doc)
        if DOUBLE_KEY in obj:
            bits = _hex_bits(obj[DOUBLE_KEY], 8, DOUBLE_KEY)
            return struct.unpack("<d", bits)[0]
        if DECIMAL_KEY in obj:
            return Decimal128.from_bid(_hex_bits(obj[DECIMAL_KEY], 16, DECIMAL_KEY))
    elif ESCAPE_KEY in obj or DBREF_KEY in obj or DOUBLE_KEY in obj or DECIMAL_KEY in obj:
        raise RecordError("an escape marker must be the only key of its object")
    return _ejson_object_hook(obj, LOAD_OPTIONS)


def decode_line(line: bytes | str) -> dict[str, Any]:
    """A record back to the document it was made from; `RecordError` if it is not one."""
    try:
        value = json.loads(line, object_hook=_hook)
    except RecordError:
        raise
    except (ValueError, TypeError, KeyError, OverflowError, UnicodeDecodeError) as exc:
        raise RecordError(f"not a valid Extended JSON record: {exc}") from exc
    except Exception as exc:  # bson's parsers raise assorted errors on bad input
        raise RecordError(f"not a valid Extended JSON record: {exc}") from exc
    if not isinstance(value, dict):
        raise RecordError("a record must be a JSON object")
    return value
