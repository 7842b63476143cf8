"""Long-term memory items, the pure part: what a namespace, a key and a value may be, how
an item is keyed and stored, and how a search filters and ranks (no I/O).

An item is one document per (tenant, owner, namespace, key) in the ``memory_items``
collection (docs/integrations.md, "LangGraph store"):

* a **namespace** is a tuple of 1 to `MAX_DEPTH` labels, each a string of 1 to
  `MAX_LABEL_CHARS` characters without ``.`` or NUL (LangGraph's own rule; newlines and
  other characters are allowed, as in LangGraph's stores). Its stored path `path_of` joins
  the labels each followed by ``.``, so a prefix is a range of paths that stops at a label
  boundary (``("foo",)`` never reaches ``("foobar",)``);
* a **key** is a string of 1 to `MAX_KEY_CHARS` characters without NUL;
* a **value** is a JSON object of at most `MAX_VALUE_BYTES` (UTF-8, compact), numbers
  finite; it is stored as those bytes (sealed under a keyring), so its keys (``$ref``,
  ``a.b``) are data, never operators, and come back unchanged;
* the `_id` is ``<tenant>/<hash of (owner, namespace, key)>``: bounded whatever the labels,
  and the shard key convention of every collection (``tenant``, ``_id``).

Filters are LangGraph's: ``{field: value}`` (equality, a nested object compared field by
field, a list element by element) and ``{field: {"$eq" | "$ne" | "$gt" | "$gte" | "$lt" |
"$lte": value}}``, evaluated here on opened values, never sent to the database.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from mindstore.errors import ValidationError, WrongType
from mindstore.ids import is_name

__all__ = [
    "COMPARISONS",
    "MAX_DEPTH",
    "MAX_KEY_CHARS",
    "MAX_LABEL_CHARS",
    "MAX_LIMIT",
    "MAX_VALUE_BYTES",
    "MAX_VECTORS",
    "SIMILARITIES",
    "check_distance",
    "check_key",
    "check_namespace",
    "check_page",
    "check_prefix",
    "cosine",
    "decode_value",
    "decode_vectors",
    "encode_value",
    "encode_vectors",
    "inner_product",
    "item_id",
    "matches",
    "namespace_of",
    "negative_l2",
    "path_of",
    "prefix_range",
]

MAX_DEPTH = 32
MAX_LABEL_CHARS = 256
MAX_KEY_CHARS = 1024
MAX_VALUE_BYTES = 1024 * 1024
"""A value's JSON text, at most: a memory, not a file (a document holds 16 MiB)."""
MAX_VECTORS = 256
"""Embedded texts per item at most (one per indexed field or list element)."""
MAX_DIMS = 16_384
MAX_LIMIT = 10_000
"""The largest `limit` and `offset` a search or a namespace listing takes."""
COMPARISONS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")
"""The filter operators LangGraph documents (and its stores implement)."""
SEPARATOR = "."


def _shown(value: Any) -> str:
    return repr(value)[:60]


def _check_label(label: Any, what: str) -> str:
    if not isinstance(label, str):
        raise WrongType(f"{what}: a namespace label must be a string, not {type(label).__name__}")
    if not label:
        raise ValidationError(f"{what}: a namespace label may not be empty")
    if SEPARATOR in label or "\x00" in label:
        raise ValidationError(f"{what}: label {_shown(label)} holds '.' or NUL")
    if len(label) > MAX_LABEL_CHARS:
        raise ValidationError(f"{what}: a label is at most {MAX_LABEL_CHARS} characters")
    return label


def check_prefix(labels: Any, what: str = "namespace_prefix") -> tuple[str, ...]:
    """A namespace prefix (empty allowed: every namespace)."""
    if isinstance(labels, str) or not isinstance(labels, Sequence):
        raise WrongType(f"{what} must be a tuple of strings, not {type(labels).__name__}")
    if len(labels) > MAX_DEPTH:
        raise ValidationError(f"{what}: at most {MAX_DEPTH} labels")
    return tuple(_check_label(label, what) for label in labels)


def check_namespace(labels: Any, what: str = "namespace") -> tuple[str, ...]:
    """A namespace an item lives in: at least one label."""
    checked = check_prefix(labels, what)
    if not checked:
        raise ValidationError(f"{what} may not be empty")
    return checked


def check_key(key: Any, what: str = "key") -> str:
    if not isinstance(key, str):
        raise WrongType(f"{what} must be a string, not {type(key).__name__}")
    if not key or len(key) > MAX_KEY_CHARS or "\x00" in key:
        raise ValidationError(f"{what} must be 1 to {MAX_KEY_CHARS} characters without NUL")
    return key


def check_page(value: Any, what: str) -> int:
    """A `limit` or `offset`: an int in 0..`MAX_LIMIT`."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise WrongType(f"{what} must be an int, not {type(value).__name__}")
    if not 0 <= value <= MAX_LIMIT:
        raise ValidationError(f"{what} must be between 0 and {MAX_LIMIT}, not {value}")
    return value


def path_of(namespace: Sequence[str]) -> str:
    """The stored path of a namespace: each label followed by the separator."""
    return "".join(label + SEPARATOR for label in namespace)


def namespace_of(path: str) -> tuple[str, ...]:
    return tuple(path.split(SEPARATOR)[:-1])


def prefix_range(prefix: Sequence[str]) -> dict[str, str] | None:
    """The range of stored paths under `prefix` (itself included); None: every path."""
    if not prefix:
        return None
    start = path_of(prefix)
    return {"$gte": start, "$lt": start[:-1] + chr(ord(SEPARATOR) + 1)}


def item_id(tenant: str, namespace: Sequence[str], key: str) -> str:
    """``<tenant>/<hash of (namespace, key)>``: one item per (namespace, key) in a tenant,
    whichever owner holds it (as a conversation id names one task per tenant)."""
    text = json.dumps([list(namespace), key], ensure_ascii=False, separators=(",", ":"))
    return f"{tenant}/{hashlib.sha256(text.encode()).hexdigest()[:40]}"


OWNER_ALPHABET = "1-128 printable characters, not starting with '$'"


def is_owner_label(label: str) -> bool:
    """Whether a namespace label can name an owner (the owner alphabet, `mindstore.ids`)."""
    return is_name(label)


MAX_TTL_MINUTES = 525_600_000.0
"""A thousand years: a longer TTL is a mistake, not a policy."""


def check_ttl(minutes: Any, what: str = "ttl") -> float | None:
    """A TTL in minutes: a finite number above 0 (None: the item never expires)."""
    if minutes is None:
        return None
    if isinstance(minutes, bool) or not isinstance(minutes, (int, float)):
        raise WrongType(f"{what} must be a number of minutes, not {type(minutes).__name__}")
    if not math.isfinite(minutes) or not 0 < minutes <= MAX_TTL_MINUTES:
        raise ValidationError(f"{what} must be above 0 and at most {MAX_TTL_MINUTES} minutes")
    return float(minutes)


def rank(
    candidates: Sequence[Sequence[Sequence[float]]],
    query: Sequence[float],
    *,
    limit: int,
    offset: int,
    distance: str = "cosine",
) -> list[tuple[int, float | None]]:
    """(candidate index, score) of the page [offset, offset + limit) of `candidates`
    (each a list of vectors) ranked by their best similarity to `query` under `distance`
    (`SIMILARITIES`), highest first (ties: the candidates' order); candidates without a
    vector fill a page the ranked ones leave short, unscored (as LangGraph's in-memory
    store does)."""
    similarity = SIMILARITIES[check_distance(distance)]
    scored = [
        (max(similarity(query, vector) for vector in vectors), index)
        for index, vectors in enumerate(candidates)
        if vectors
    ]
    scored.sort(key=lambda pair: (-pair[0], pair[1]))
    page: list[tuple[int, float | None]] = [
        (index, score) for score, index in scored[offset : offset + limit]
    ]
    if len(page) < limit:
        unscored = [index for index, vectors in enumerate(candidates) if not vectors]
        page += [(index, None) for index in unscored[: limit - len(page)]]
    return page


def encode_value(value: Any, what: str = "value") -> bytes:
    """A value's stored bytes: compact JSON (see the module doc)."""
    if not isinstance(value, Mapping):
        raise WrongType(f"{what} must be a mapping, not {type(value).__name__}")
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError) as error:
        raise ValidationError(f"{what} is not JSON with finite numbers: {error}") from None
    data = text.encode("utf-8")
    if len(data) > MAX_VALUE_BYTES:
        raise ValidationError(f"{what} is {len(data)} bytes as JSON; at most {MAX_VALUE_BYTES}")
    return data


def decode_value(data: bytes) -> dict[str, Any]:
    value = json.loads(data.decode("utf-8"))
    if not isinstance(value, dict):
        raise ValidationError("a stored memory value is not an object")
    return value


def encode_vectors(vectors: Sequence[Sequence[float]], dims: int) -> bytes:
    """Vectors as little-endian float32, `dims` each: a quarter of BSON doubles."""
    if not 0 < dims <= MAX_DIMS:
        raise ValidationError(f"dims must be between 1 and {MAX_DIMS}, not {dims}")
    if len(vectors) > MAX_VECTORS:
        raise ValidationError(f"an item embeds at most {MAX_VECTORS} texts")
    out = bytearray()
    for vector in vectors:
        if len(vector) != dims:
            raise ValidationError(f"an embedding has {len(vector)} dimensions, not {dims}")
        floats = [float(x) for x in vector]
        if not all(math.isfinite(x) for x in floats):
            raise ValidationError("an embedding holds a number that is not finite")
        out += struct.pack(f"<{dims}f", *floats)
    return bytes(out)


def decode_vectors(data: bytes, dims: int) -> list[tuple[float, ...]]:
    size = 4 * dims
    if dims <= 0 or len(data) % size:
        raise ValidationError("stored embeddings do not match their dimensions")
    return [struct.unpack_from(f"<{dims}f", data, start) for start in range(0, len(data), size)]


def cosine(query: Sequence[float], vector: Sequence[float]) -> float:
    """Cosine similarity (0.0 when either vector is zero), as LangGraph's stores rank."""
    dot = sum(a * b for a, b in zip(query, vector, strict=False))
    norms = math.sqrt(sum(a * a for a in query)) * math.sqrt(sum(b * b for b in vector))
    return dot / norms if norms > 0 else 0.0


def negative_l2(query: Sequence[float], vector: Sequence[float]) -> float:
    """Minus the Euclidean distance: nearer is higher (LangGraph's Postgres store's `l2`)."""
    return -math.sqrt(sum((a - b) * (a - b) for a, b in zip(query, vector, strict=False)))


def inner_product(query: Sequence[float], vector: Sequence[float]) -> float:
    """The dot product (LangGraph's Postgres store's `inner_product`)."""
    return sum(a * b for a, b in zip(query, vector, strict=False))


SIMILARITIES = {"cosine": cosine, "l2": negative_l2, "inner_product": inner_product}
"""An `IndexConfig`'s `distance_type` -> the score a search ranks by, highest first: the
scores LangGraph's Postgres store gives (1 - cosine distance, minus the L2 distance, the
inner product)."""


def check_distance(distance: Any) -> str:
    if distance not in SIMILARITIES:
        raise ValidationError(
            f"index: distance_type must be one of {', '.join(SIMILARITIES)}, not {distance!r}"
        )
    return str(distance)


def check_filter(filter: Any, what: str = "filter") -> dict[str, Any]:
    """A search filter: a mapping of string fields; an operator mapping holds only
    `COMPARISONS` (an unknown ``$`` key is refused, never passed on)."""
    if filter is None:
        return {}
    if not isinstance(filter, Mapping):
        raise WrongType(f"{what} must be a mapping, not {type(filter).__name__}")
    for field, wanted in filter.items():
        if not isinstance(field, str):
            raise WrongType(f"{what}: field {_shown(field)} is not a string")
        _check_condition(wanted, f"{what}[{field!r}]", 1)
    return dict(filter)


MAX_FILTER_DEPTH = 32
"""How deep a filter's nested objects may go (a value nests as deep as it likes)."""


def _check_condition(wanted: Any, what: str, depth: int) -> None:
    if depth > MAX_FILTER_DEPTH:
        raise ValidationError(f"{what}: a filter nests at most {MAX_FILTER_DEPTH} objects deep")
    if isinstance(wanted, (list, tuple)):
        for index, inner in enumerate(wanted):
            _check_condition(inner, f"{what}[{index}]", depth + 1)
    elif isinstance(wanted, Mapping) and _is_operators(wanted):
        unknown = sorted(str(op) for op in wanted if op not in COMPARISONS)
        if unknown:
            raise ValidationError(
                f"{what}: unknown operator {', '.join(unknown)} (known: {', '.join(COMPARISONS)})"
            )
        for op in ("$gt", "$gte", "$lt", "$lte"):
            if op in wanted:
                _number(wanted[op], f"{what}.{op}")
    elif isinstance(wanted, Mapping):
        for field, inner in wanted.items():
            _check_condition(inner, f"{what}[{field!r}]", depth + 1)


def _is_operators(wanted: Mapping[Any, Any]) -> bool:
    return any(isinstance(k, str) and k.startswith("$") for k in wanted)


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise WrongType(f"{what} must be a number, not {type(value).__name__}")
    try:
        number = float(value)
    except ValueError:
        raise ValidationError(f"{what}: {_shown(value)} is not a number") from None
    if not math.isfinite(number):
        raise ValidationError(f"{what} must be finite")
    return number


def matches(value: Mapping[str, Any], filter: Mapping[str, Any]) -> bool:
    """Whether a stored value passes a (checked) filter: every field's condition holds."""
    return all(_compare(value.get(field), wanted) for field, wanted in filter.items())


def _compare(held: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        if _is_operators(wanted):
            return all(_apply(held, op, operand) for op, operand in wanted.items())
        return isinstance(held, Mapping) and all(
            _compare(held.get(k), v) for k, v in wanted.items()
        )
    if isinstance(wanted, (list, tuple)):
        return (
            isinstance(held, (list, tuple))
            and len(held) == len(wanted)
            and all(_compare(h, w) for h, w in zip(held, wanted, strict=True))
        )
    return bool(held == wanted)


def _apply(held: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return bool(held == operand)
    if op == "$ne":
        return bool(held != operand)
    try:
        number = _number(held, "value")
    except ValidationError:
        return False  # a missing or non-numeric field never passes a range
    bound = float(operand)
    if op == "$gt":
        return number > bound
    if op == "$gte":
        return number >= bound
    if op == "$lt":
        return number < bound
    return number <= bound  # "$lte"
