"""The task header as a task document stores it, and read back from one (docs/write-paths.md,
"The stored header"): compact fields at the top level of the document, no tail (the tail is
read from the last stored message)."""

from __future__ import annotations

from typing import Any

from mindstore.model.header import TaskHeader, header_from_stored, stored_header, tail_of
from mindstore.model.messages import UnknownMessage
from mindstore.payloads import read_value

__all__ = ["TAIL_KEYS", "header_from_document", "header_to_fields"]


def header_to_fields(header: TaskHeader) -> dict[str, Any]:
    """The header as top-level task document fields (`stored_header`: no tail, compact)."""
    return stored_header(header)


TAIL_KEYS = ("id", "role", "started_ts", "finished_ts")
"""What the header's tail takes from the last stored message."""


def header_from_document(document: dict[str, Any]) -> TaskHeader:
    """The header of a task document read with (at least) its last message (`$slice: -1`);
    read without messages (a listing), its tail is None.

    The tail comes from the last message's stored fields, read as an unknown message reads
    them (escapes removed), so a malformed message elsewhere never fails a header read."""
    messages = document.get("messages")
    seq = document.get("seq", 0)
    tail = None
    if isinstance(messages, list) and messages and isinstance(messages[-1], dict):
        last = messages[-1]
        view = UnknownMessage.model_validate(
            {k: read_value(last[k], {}) for k in TAIL_KEYS if k in last}
        )
        if isinstance(seq, int) and seq > 0:
            tail = tail_of(seq - 1, view)
    return header_from_stored(document, tail)
