"""The id alphabets, and the storage key that makes a task id per tenant.

Ids come from callers, from imported histories and from backups, and they end up in
query filters, in update paths and (as values) inside aggregation expressions. Two
alphabets keep them inert:

* **keys** (tenants, task and dialog ids): 1-128 characters of ``[A-Za-z0-9_-.:]``. They
  name documents, so they must be safe in a filter, a log line, a file name and a URL.
* **names** (message, tool-call, entry and exit ids, owners): 1-128 printable characters,
  not starting with ``$``, without NUL or other control characters and without lone
  surrogates. Provider ids (``call_…``, ``toolu_…``, UUIDs, e-mail owners) all fit. Pipelines
  still compare them as ``$literal`` values, so even a stored name can never act as an
  expression; the alphabet is the second wall, not the only one.

A task's identity is (tenant, task id): the same id may exist in two tenants and neither
learns of the other. The document key is ``"<tenant>/<task id>"`` (``/`` is outside the key
alphabet, so the split is unambiguous). Documents written before this rule used the bare
task id as ``_id``; `legacy_key` names that form so reads can still find them.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from typing import Any, TypeGuard

from mindstore.errors import ValidationError

MAX_ID_LENGTH = 128
KEY_ALPHABET = "[A-Za-z0-9_-.:]"
_KEY_PATTERN = re.compile(r"[A-Za-z0-9_\-.:]{1,128}")
KEY_SEPARATOR = "/"


def _shown(value: Any) -> str:
    """A short, printable rendering of a rejected value for an error message."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def check_key(value: Any, what: str = "id") -> str:
    """A tenant, task or dialog id: 1-128 characters of ``[A-Za-z0-9_-.:]``."""
    if not isinstance(value, str) or not _KEY_PATTERN.fullmatch(value):
        raise ValidationError(
            f"invalid {what}: expected 1-{MAX_ID_LENGTH} characters of {KEY_ALPHABET}, "
            f"got {_shown(value)}"
        )
    return value


def is_name(value: Any) -> TypeGuard[str]:
    """True for a string in the name alphabet (see the module docstring)."""
    if not isinstance(value, str) or not 0 < len(value) <= MAX_ID_LENGTH:
        return False
    if value.startswith("$"):
        return False
    for char in value:
        category = unicodedata.category(char)
        if category in ("Cc", "Cs"):  # control characters (NUL included), lone surrogates
            return False
    return True


def check_name(value: Any, what: str = "message id") -> str:
    """A message, tool-call, entry or exit id, or an owner: see the module docstring."""
    if not is_name(value):
        raise ValidationError(
            f"invalid {what}: expected 1-{MAX_ID_LENGTH} printable characters, not starting "
            f"with '$', got {_shown(value)}"
        )
    return value


def check_optional_name(value: Any, what: str) -> str | None:
    return None if value is None else check_name(value, what)


def task_key(tenant: str, task_id: str) -> str:
    """The stored ``_id`` of a task (and of its dialog node): unique per tenant."""
    return f"{tenant}{KEY_SEPARATOR}{task_id}"


PAGE_KEY_SEPARATOR = "#"
"""Between a task's key and a page number in a page's `_id`: outside the key alphabet, so
no task key can end in something that reads as another task's page."""


def page_key(key: str, page: int) -> str:
    """The `_id` of page `page` of the task stored under `key`: deterministic, so writing a
    page twice (a retried or repaired seal) writes the same document."""
    return f"{key}{PAGE_KEY_SEPARATOR}{page}"


def legacy_key(task_id: str) -> str:
    """The ``_id`` that documents written before per-tenant ids used: the bare task id."""
    return task_id


def task_id_of(key: str) -> str:
    """The caller's task id from a stored ``_id`` (either form)."""
    return key.split(KEY_SEPARATOR, 1)[1] if KEY_SEPARATOR in key else key


_DERIVED_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_-"


def derived_name(*parts: str) -> str:
    """A message id derived from `parts` (a caller's id and what the message is to it):
    21 characters of the nanoid alphabet, as long as a drawn id, never starting with '-'.

    A verb that writes several messages but is named by one caller id (an entry's config
    and context messages, a create's config) derives the others from it, so its retry
    from another process, after a crash, writes the very same documents."""
    digest = hashlib.blake2b("\x1f".join(parts).encode("utf-8", "surrogatepass"),
                             digest_size=21).digest()  # fmt: skip
    text = "".join(_DERIVED_ALPHABET[byte & 63] for byte in digest)
    return text if not text.startswith("-") else "_" + text[1:]
