"""Shared pydantic plumbing for the message model.

Stored documents outlive the code that wrote them: a newer writer may add fields or
whole part types that this version does not know. Every model therefore keeps unknown
fields (`extra="allow"`) and the unions fall back to an `Unknown*` model that keeps the raw
dict, so reading and rewriting a document never drops data.
"""

from __future__ import annotations

import copy
import secrets
import time
from collections.abc import Callable
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator

from mindstore.draws import draw

JSON = dict[str, Any]

# nanoid's default alphabet, URL-safe: [A-Za-z0-9_-]. 64 characters, so the low six bits
# of a random byte pick one uniformly.
ID_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_-"
ID_LENGTH = 21


def _random_id() -> str:
    """A nanoid (21 characters of `ID_ALPHABET`, 126 random bits from `secrets`, as the
    nanoid package draws them) that does not start with '-', so it can never be read as
    an option when typed on a command line (`mindstore tasks tree <id>`)."""
    while True:
        value = "".join(ID_ALPHABET[byte & 63] for byte in secrets.token_bytes(ID_LENGTH))
        if not value.startswith("-"):
            return value


# The two sources of non-determinism in the model. Tests (and deterministic replays)
# swap them out; everything else calls `new_id()` and `now_ts()`.
ID_SOURCE: Callable[[], str] = _random_id
CLOCK: Callable[[], float] = time.time

Timestamp = int | float
"""Epoch seconds as stored: a float to the millisecond when the store stamps it, whatever
a caller gave (an int for the Mind Map's integer form), and int in older documents."""

TS_DIGITS = 3
"""Timestamps the store makes are epoch seconds rounded to this many decimals (1 ms)."""


def new_id() -> str:
    """A fresh 21-character nanoid, the id format of the Mind Map (the one an earlier
    attempt of the running operation drew, when this is its retry: `mindstore.draws`)."""
    return draw("id", ID_SOURCE)


def to_ms(seconds: float) -> float:
    """Seconds rounded to the millisecond, the one precision of every timestamp the store
    makes and of every duration analytics reports (a difference of two such timestamps
    carries binary noise, 0.30000001192 for 0.3, that this removes)."""
    return round(float(seconds), TS_DIGITS)


def now_ts() -> float:
    """Now, in epoch seconds to the millisecond (a float).

    The Mind Map format stamps `int(time())`; a model turn lasts well under a second, so
    whole seconds would report 0.3 s as 0 and 1.4 s as 1 (docs/contract.md). The unit stays
    seconds, so durations are still a plain `$subtract` and integer-second documents read
    and compare as they are."""
    return to_ms(draw("ts", CLOCK))


def later_ts(ts: Timestamp, steps: int) -> Timestamp:
    """`ts` plus `steps` milliseconds: the Mind Map orders the messages one verb writes
    (a sub-task's entry, config, context) by `ts + 0.001`, `ts + 0.002`... A caller's int
    stays that integer second (the Mind Map's `int(ts + 0.001)`)."""
    if isinstance(ts, int):
        return ts
    return to_ms(ts + steps / 10**TS_DIGITS)


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


class Verbatim(Model):
    """What this version does not know (a part's `type`, a message's `role`), kept as the
    raw dict: validated from any dict, serialised back to exactly that dict, so a newer
    writer's data survives a read-modify cycle here (`UnknownPart`, `UnknownMessage`)."""

    raw: JSON = Field(default_factory=dict)
    what: ClassVar[str] = "a value"
    """What the union expected, for the error on a value that is no dict."""

    @model_validator(mode="before")
    @classmethod
    def _wrap(cls, data: Any) -> Any:
        if isinstance(data, cls):
            return data
        if isinstance(data, dict):
            return {"raw": dict(data)}
        raise ValueError(f"{cls.what} must be an object, got {type(data).__name__}")

    @model_serializer(mode="plain")
    def _serialize(self) -> JSON:
        return copy.deepcopy(self.raw)

    def _raw_text(self, name: str) -> str | None:
        value = self.raw.get(name)
        return value if isinstance(value, str) else None
