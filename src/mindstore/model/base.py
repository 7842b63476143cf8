"""Shared pydantic plumbing for the message model.

Stored documents outlive the code that wrote them: a newer writer may add fields or
whole part types that this version does not know. Every model therefore keeps unknown
fields (`extra="allow"`) and the unions fall back to an `Unknown*` model that keeps the raw
dict, so reading and rewriting a document never drops data.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import nanoid
from pydantic import BaseModel, ConfigDict

JSON = dict[str, Any]

# nanoid's default alphabet is URL-safe: [A-Za-z0-9_-].
ID_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_-"


def _nanoid() -> str:
    """A 21-character nanoid that does not start with '-', so it can never be read as an
    option when typed on a command line (`mindstore tasks tree <id>`)."""
    value = nanoid.generate(ID_ALPHABET, 21)
    while value.startswith("-"):
        value = nanoid.generate(ID_ALPHABET, 21)
    return value


# The two sources of non-determinism in the model. Tests (and deterministic replays)
# swap them out; everything else calls `new_id()` and `clock()`.
ID_SOURCE: Callable[[], str] = _nanoid
CLOCK: Callable[[], float] = time.time


def new_id() -> str:
    """A fresh 21-character nanoid, the id format of the Mind Map."""
    return ID_SOURCE()


def clock() -> float:
    return CLOCK()


def now_ts() -> int:
    """Epoch seconds as the Mind Map stores them (an int, so durations are plain `$subtract`)."""
    return int(CLOCK())


class Model(BaseModel):
    """Base of every stored model: tolerant of unknown fields, strict about known ones."""

    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
        validate_assignment=False,
        ser_json_inf_nan="constants",
        use_enum_values=True,
    )

    def to_dict(self) -> JSON:
        """The stored (BSON-ready) form: plain Python types, aliases, nothing dropped."""
        return self.model_dump(mode="python", by_alias=True)
