"""Lossless round trips: what a payload says that mindstore does not model.

Every importer turns what it understands into typed mindstore parts, renders the result
back in the format's canonical form, and keeps only the *difference* between the original
element and that rendering (`diff`): unmodelled keys (`cache_control`, `thoughtSignature`,
annotations), keys the original left out, and values spelled another way (a list where the
canonical form has a string, an integer message id). The exporter renders canonically again
and re-applies the difference (`patch`), so `to_x(from_x(p)) == p`.

A replaced value and a list element's difference are guarded by a short hash of the
rendering they were taken against: they are re-applied only while the rendering is still
the same. An edit made in the store (a stubbed tool result, a changed text) therefore always
wins over a stale provider detail, and nothing is ever applied to the wrong element.

The difference is kept in the message's `metadata` under the format's name (see
`read_entry` / `with_entry`); it never reaches a model.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from mindstore.model.base import JSON

FORMAT_KEYS: tuple[str, ...] = (
    "openai_chat",
    "responses",
    "anthropic",
    "gemini",
    "message_layer",
    "agent_graph",
)
"""The metadata keys under which the formats keep what they do not model."""


def fingerprint(value: Any) -> str:
    """A short, stable hash of a JSON-like value (bytes and other leaves via `repr`)."""
    text = json.dumps(
        value, sort_keys=True, separators=(",", ":"), default=repr, ensure_ascii=False
    )
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def _same(a: Any, b: Any) -> bool:
    """Equality that also tells `1` from `1.0` and `True` from `1` (a payload's own spelling)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def diff(original: Mapping[str, Any], canonical: Mapping[str, Any]) -> JSON:
    """What turns `canonical` back into `original` (an empty dict when they are equal).

    Keys: `add` (keys the rendering lacks: value), `drop` (keys the original lacked:
    fingerprint of the rendered value), `swap` (key: [fingerprint of the rendered value,
    original value]), `keys` (key: nested difference of two dicts) and `items` (key: {index:
    [fingerprint of the rendered element, nested difference]} for two lists of dicts of the
    same length).
    """
    out: JSON = {}
    for key, value in original.items():
        if key not in canonical:
            out.setdefault("add", {})[key] = value
            continue
        rendered = canonical[key]
        if _same(value, rendered):
            continue
        if isinstance(value, dict) and isinstance(rendered, dict):
            out.setdefault("keys", {})[key] = diff(value, rendered)
        elif (
            isinstance(value, list)
            and isinstance(rendered, list)
            and len(value) == len(rendered)
            and all(
                isinstance(x, dict) and isinstance(y, dict)
                for x, y in zip(value, rendered, strict=True)
            )
        ):
            items = {
                str(i): [fingerprint(y), diff(x, y)]
                for i, (x, y) in enumerate(zip(value, rendered, strict=True))
                if not _same(x, y)
            }
            out.setdefault("items", {})[key] = items
        else:
            out.setdefault("swap", {})[key] = [fingerprint(rendered), value]
    for key, rendered in canonical.items():
        if key not in original:
            out.setdefault("drop", {})[key] = fingerprint(rendered)
    return out


def patch(canonical: JSON, delta: Mapping[str, Any] | None) -> JSON:
    """Apply a difference from `diff` to a fresh rendering; stale parts are skipped."""
    if not delta:
        return canonical
    result = dict(canonical)
    for key, value in (delta.get("add") or {}).items():
        result.setdefault(key, value)
    for key, (mark, value) in (delta.get("swap") or {}).items():
        if key in result and fingerprint(result[key]) == mark:
            result[key] = value
    for key, nested in (delta.get("keys") or {}).items():
        if isinstance(result.get(key), dict):
            result[key] = patch(result[key], nested)
    for key, items in (delta.get("items") or {}).items():
        current = result.get(key)
        if not isinstance(current, list):
            continue
        current = list(current)
        for index, (mark, nested) in items.items():
            position = int(index)
            if (
                position < len(current)
                and isinstance(current[position], dict)
                and fingerprint(current[position]) == mark
            ):
                current[position] = patch(current[position], nested)
        result[key] = current
    for key, mark in (delta.get("drop") or {}).items():
        if key in result and fingerprint(result[key]) == mark:
            del result[key]
    return result


# -- where the difference lives on a message -------------------------------------------


def read_entry(metadata: Mapping[str, Any] | None, fmt: str) -> JSON:
    """The format's entry in a message's metadata (`{}` when there is none)."""
    if not metadata:
        return {}
    entry = metadata.get(fmt)
    return entry if isinstance(entry, dict) else {}


def _is_empty(value: Any) -> bool:
    """Nothing worth keeping: None, False or an empty dict/list (not 0, which equals False)."""
    return value is None or value is False or (isinstance(value, dict | list) and not value)


def with_entry(
    metadata: Mapping[str, Any] | None, fmt: str, entry: Mapping[str, Any]
) -> JSON | None:
    """`metadata` with the format's entry set (or left out when the entry is empty)."""
    result = dict(metadata or {})
    cleaned = {key: value for key, value in entry.items() if not _is_empty(value)}
    if cleaned:
        result[fmt] = cleaned
    else:
        result.pop(fmt, None)
    return result or None


def without_entries(metadata: Mapping[str, Any] | None, formats: tuple[str, ...]) -> JSON:
    """A message's own metadata, without the entries the formats keep there."""
    return {key: value for key, value in (metadata or {}).items() if key not in formats}
