"""Framework conversation ids -> mindstore task ids: the one rule every adapter uses.

The frameworks name a conversation with whatever string the application chose (an OpenAI
Agents `session_id`, a LangChain `session_id`, a LangGraph `thread_id`): an e-mail address
and a suffix, a path such as ``org/team/chat-1``, a UUID. A task id is a key (1-128
characters of ``[A-Za-z0-9_-.:]``, `mindstore.ids`), because it names documents. So:

* a **conversation id** is a string of 1-512 characters without control characters
  (Unicode category Cc, NUL and newlines included) and without lone surrogates (BSON
  cannot store them); anything else is refused with `ValidationError` naming the argument;
* `task_id_for(conversation_id)` is the task that holds it, deterministically:

  - an id that already is a key, and does not start with ``_:``, is its own task id
    (``support-42`` -> ``support-42``; a task stored before this rule keeps its id);
  - any other id maps to ``_:`` + a readable slug + ``:`` + 32 hex digits of its BLAKE2b
    digest (16 bytes, over its UTF-8). The slug is the id with each run of characters
    outside the key alphabet replaced by ``_``, cut to 48 characters:
    ``org/team/chat-1`` -> ``_:org_team_chat-1:<32 hex>``.

  No kept id starts with ``_:`` and every mapped one does, so the two never meet; two
  mapped ids meet only if their 128-bit digests do. A mapped task id is at most 83
  characters.
* the adapters keep the conversation id as given in the task's metadata (`session_id` for
  the session adapters, `thread_id` for LangGraph, `conversation_id` for pydantic-ai, whose
  functions take the conversation id as their `task_id`), and list it back from there
  (`conversation_id_of`).

Pure: no I/O, no framework import (`mindstore.integrations` re-exports `task_id_for`).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from typing import Any

from mindstore.errors import ValidationError
from mindstore.ids import MAX_ID_LENGTH

MAX_CONVERSATION_ID_LENGTH = 512
MAPPED_PREFIX = "_:"
SLUG_LENGTH = 48
DIGEST_BYTES = 16
ORIGINAL_KEYS = ("session_id", "thread_id", "conversation_id")
"""Task metadata keys an adapter keeps the conversation id in (`conversation_id_of`)."""

_KEY = re.compile(r"[A-Za-z0-9_\-.:]+")
_OUTSIDE = re.compile(r"[^A-Za-z0-9_\-.:]+")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def check_conversation_id(value: Any, what: str = "conversation_id") -> str:
    """A conversation id as the frameworks give it (see the module doc), else
    `ValidationError` naming `what`."""
    if not isinstance(value, str):
        raise ValidationError(f"invalid {what}: expected a string, got {_shown(value)}")
    if not 0 < len(value) <= MAX_CONVERSATION_ID_LENGTH:
        raise ValidationError(
            f"invalid {what}: expected 1-{MAX_CONVERSATION_ID_LENGTH} characters, got {len(value)}"
        )
    for char in value:
        if unicodedata.category(char) in ("Cc", "Cs"):
            raise ValidationError(
                f"invalid {what}: control characters and lone surrogates are not allowed, "
                f"got {_shown(value)}"
            )
    return value


def is_kept(conversation_id: str) -> bool:
    """True when the id is its own task id (a key not starting with the mapped prefix)."""
    return (
        len(conversation_id) <= MAX_ID_LENGTH
        and _KEY.fullmatch(conversation_id) is not None
        and not conversation_id.startswith(MAPPED_PREFIX)
    )


def task_id_for(conversation_id: str, what: str = "conversation_id") -> str:
    """The task id that holds a framework conversation (a session id, a thread id).

    An id inside the task-id alphabet is used as it is; any other is mapped to a stable,
    collision-free task id (a readable slug and a digest), so mindstore's own API finds the
    conversation.

    Args:
        conversation_id: The framework's id.
        what: The argument's name in error messages.

    Returns:
        The task id.

    Raises:
        ValidationError: Not a non-empty string, or longer than
            `MAX_CONVERSATION_ID_LENGTH`.

    Example:
        ```python
        task_id = task_id_for("org/team/chat-1")
        await acme.tasks.tail(task_id, 20)
        ```
    """
    check_conversation_id(conversation_id, what)
    if is_kept(conversation_id):
        return conversation_id
    slug = _OUTSIDE.sub("_", conversation_id)[:SLUG_LENGTH]
    digest = hashlib.blake2b(conversation_id.encode("utf-8"), digest_size=DIGEST_BYTES)
    return f"{MAPPED_PREFIX}{slug}:{digest.hexdigest()}"


def conversation_id_of(record: Any) -> str:
    """The conversation id a task holds, as the framework gave it: kept in the task's metadata
    by the adapters; a task without it (stored before, or made by other code) is named by
    its own id.

    Args:
        record: A task record (`tasks.get`, `tasks.list`).

    Returns:
        The conversation id.
    """
    metadata = getattr(record, "metadata", None) or {}
    for key in ORIGINAL_KEYS:
        value = metadata.get(key)
        if isinstance(value, str):
            return value
    task_id: str = record.id
    return task_id
