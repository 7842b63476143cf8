"""The ciphertext format: one sealed value as one BSON binary, AES-256-GCM.

A sealed value is stored as `bson.Binary` of the user-defined subtype `SUBTYPE` (so a
caller's own bytes, stored as subtype 0, never read as one), holding::

    header = format (high 4 bits) | kind (low 4 bits), then the key version as a varint
    blob   = header + nonce (12 bytes, random) + AES-GCM(value bytes) + tag (16 bytes)

The overhead is 30 bytes for a key version below 128 (BSON's length and subtype bytes
cost what a string's length and trailing NUL cost). Base64 text would add a third more.

The associated data is the header plus the value's *context*: tenant, task, message id
and field path, each length-prefixed. A ciphertext copied to another tenant, task,
message or field, or any changed byte, fails the tag check: `CryptoError`, never
garbage. The header is bound too, so a key version (or the format) cannot be swapped.

Formats: 2 is what `seal_value` writes. Format 1 is the same layout, written before some
contexts bound more (a task's own content part its index, a LangGraph checkpoint's
fingerprint chain the message record it belongs to, ...): the caller that changed a
context passes the old one as `legacy_context`, so a format-1 ciphertext still opens with
the binding it was sealed under, until the re-encryption sweep has re-sealed it as format
2 and the tenant refuses format 1 (`legacy=False`; docs/encryption.md, "Formats").

Kinds: a `str` is sealed as its UTF-8, `bytes` as they are, anything else (numbers,
lists, mappings, None) as the BSON of ``{"": value}``, so it reads back with its types.
The kind (text, bytes, mapping, list, other) is in the clear header, so `blank` can stand
an empty value of the same kind in for a ciphertext: backup verify checks the shape of
an encrypted history without its keys.
Pure: no I/O, keys are given.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import bson
from bson.binary import Binary
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from mindstore.errors import CryptoError, ValidationError

__all__ = [
    "FORMAT",
    "KEY_BYTES",
    "LEGACY_FORMAT",
    "OVERHEAD",
    "SUBTYPE",
    "Context",
    "blank",
    "context_bytes",
    "holds_sealed",
    "is_current",
    "is_sealed",
    "key_version",
    "open_value",
    "seal_value",
    "sealed_format",
]

SUBTYPE = 0x8E
"""BSON binary subtype of a mindstore ciphertext (0x80-0xFF are user-defined)."""
FORMAT = 2
"""The format `seal_value` writes."""
LEGACY_FORMAT = 1
"""The format before format 2's bindings: read with the caller's `legacy_context`."""
_FORMATS = (LEGACY_FORMAT, FORMAT)
KEY_BYTES = 32
NONCE_BYTES = 12
TAG_BYTES = 16
OVERHEAD = 2 + NONCE_BYTES + TAG_BYTES
"""Bytes a sealed value adds to its plaintext (key versions below 128)."""
_TEXT, _BYTES, _BSON, _MAPPING, _LIST = 0, 1, 2, 3, 4
_BLANKS: dict[int, Callable[[], Any]] = {
    _TEXT: str,
    _BYTES: bytes,
    _BSON: lambda: None,
    _MAPPING: dict,
    _LIST: list,
}

Context = tuple[str, str, str, str]
"""(tenant, task id, message id or "", field path): what a ciphertext is bound to."""


def context_bytes(context: Context) -> bytes:
    """The context as associated data: each part UTF-8 and prefixed with its length."""
    out = bytearray()
    for part in context:
        raw = part.encode("utf-8", "surrogatepass")
        out += len(raw).to_bytes(4, "big") + raw
    return bytes(out)


def _varint(number: int) -> bytes:
    out = bytearray()
    while True:
        low, number = number & 0x7F, number >> 7
        if number:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _read_header(blob: bytes) -> tuple[int, int, int]:
    """(kind, key version, header length) of a sealed blob; CryptoError if malformed."""
    if len(blob) < 2 + NONCE_BYTES + TAG_BYTES or blob[0] >> 4 not in _FORMATS:
        raise CryptoError("not a mindstore ciphertext of a known format")
    version, shift, position = 0, 0, 1
    while True:
        if position >= len(blob) or shift > 28:
            raise CryptoError("malformed ciphertext header")
        byte = blob[position]
        version |= (byte & 0x7F) << shift
        position += 1
        if not byte & 0x80:
            break
        shift += 7
    return blob[0] & 0x0F, version, position


def is_sealed(value: Any) -> bool:
    """True for a stored value that is a mindstore ciphertext."""
    return type(value) is Binary and value.subtype == SUBTYPE


def holds_sealed(value: Any) -> bool:
    """True if `value` is, or holds at any depth, a mindstore ciphertext."""
    if is_sealed(value):
        return True
    if type(value) is dict:
        return any(holds_sealed(item) for item in value.values())
    if type(value) is list:
        return any(holds_sealed(item) for item in value)
    return False


def blank(value: Binary) -> Any:
    """An empty value of the kind a ciphertext holds ("", b"", {}, [] or None)."""
    kind = _read_header(bytes(value))[0]
    if kind not in _BLANKS:
        raise CryptoError("malformed ciphertext header")
    return _BLANKS[kind]()


def key_version(value: Binary) -> int:
    """The data key version a ciphertext was sealed with."""
    return _read_header(bytes(value))[1]


def _plain_bytes(value: Any) -> tuple[int, bytes]:
    if type(value) is str:
        return _TEXT, value.encode("utf-8")
    if type(value) is bytes:
        return _BYTES, value
    kind = _MAPPING if isinstance(value, dict) else _LIST if isinstance(value, list) else _BSON
    try:
        return kind, bson.encode({"": value})
    except (bson.errors.InvalidDocument, OverflowError, TypeError, UnicodeEncodeError) as exc:
        raise ValidationError(f"value cannot be stored in MongoDB: {str(exc)[:200]}") from None


def sealed_format(value: Binary) -> int:
    """The format a ciphertext was sealed in (`FORMAT`, or `LEGACY_FORMAT`)."""
    _read_header(bytes(value))
    return bytes(value)[0] >> 4


def is_current(value: Any, version: int) -> bool:
    """True for a ciphertext of the current format sealed with data key `version`: what
    the re-encryption sweep leaves as it is (plaintext, an older key or format: re-sealed)."""
    return is_sealed(value) and key_version(value) == version and sealed_format(value) == FORMAT


def seal_value(value: Any, key: AESGCM, version: int, context: Context) -> Binary:
    """`value` sealed under `key` (data key `version`), bound to `context`."""
    kind, plain = _plain_bytes(value)
    header = bytes([FORMAT << 4 | kind]) + _varint(version)
    nonce = os.urandom(NONCE_BYTES)
    sealed = key.encrypt(nonce, plain, header + context_bytes(context))
    return Binary(header + nonce + sealed, SUBTYPE)


def open_value(
    value: Binary,
    key_for: Callable[[int], AESGCM],
    context: Context,
    *,
    legacy_context: Context | None = None,
    legacy: bool = True,
) -> Any:
    """The value a ciphertext holds. `key_for(version)` gives the data key (or raises:
    `KeyShredded`, ...). A ciphertext not sealed for `context`, or changed: CryptoError.

    A format-1 ciphertext is opened with `legacy_context` (the binding before format 2,
    when the caller's context changed; None: the same `context`), and refused when
    `legacy` is False (a tenant whose sweep re-sealed everything as format 2: an older
    ciphertext there was put back from an old copy)."""
    blob = bytes(value)
    kind, version, start = _read_header(blob)
    if kind not in _BLANKS:
        raise CryptoError("malformed ciphertext header")
    if blob[0] >> 4 == LEGACY_FORMAT:
        if not legacy:
            tenant, task, message, field = context
            raise CryptoError(
                f"ciphertext at {field or 'value'} of message {message!r} in task {task!r} "
                f"(tenant {tenant!r}) is of format {LEGACY_FORMAT}, which the tenant no longer "
                "reads (its sweep re-sealed everything): put back from an old copy"
            )
        context = legacy_context or context
    header, nonce = blob[:start], blob[start : start + NONCE_BYTES]
    key = key_for(version)
    try:
        plain = key.decrypt(nonce, blob[start + NONCE_BYTES :], header + context_bytes(context))
    except InvalidTag:
        tenant, task, message, field = context
        raise CryptoError(
            f"ciphertext at {field or 'value'} of message {message!r} in task {task!r} "
            f"(tenant {tenant!r}) was not sealed there, or was changed"
        ) from None
    if kind == _TEXT:
        return plain.decode("utf-8")
    if kind == _BYTES:
        return plain
    return bson.decode(plain)[""]
