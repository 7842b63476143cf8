"""Command-line values checked before they reach the store.

Typer turns ``--start 1180591620717411303424`` into a Python int and ``--since nan`` into
a string that `float()` accepts; both then fail deep inside the driver or `datetime`
(OverflowError, ValueError) with a traceback. Here they become a `ValidationError`
naming the option: one line on stderr and exit code 2.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone

from mindstore.errors import ValidationError

__all__ = ["MAX_COUNT", "time_bound"]

#: The largest index, limit or count an option takes: a BSON int32 (no task holds more
#: messages than that; MongoDB's int64 would overflow on 2**63 and beyond).
MAX_COUNT = 2**31 - 1

_FORMS = "ISO 8601 (2026-10-05 or 2026-10-05T12:00:00Z) or epoch seconds"


def time_bound(value: str | None, option: str) -> datetime | None:
    """``--since`` / ``--until``: an ISO 8601 time (UTC when it has no offset) or finite
    epoch seconds within the years 1-9999, as an aware UTC datetime."""
    if value is None:
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        seconds = None
    if seconds is not None:
        if not math.isfinite(seconds):
            raise ValidationError(f"{option} {value!r:.40} is not a time: use {_FORMS}")
        try:
            return datetime.fromtimestamp(seconds, tz=timezone.utc)
        except (OverflowError, ValueError, OSError):
            raise ValidationError(
                f"{option} {value!r:.40} is out of range: epoch seconds of the years 1-9999"
            ) from None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValidationError(f"{option} {value!r:.40} is not a time: use {_FORMS}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    try:
        return moment.astimezone(timezone.utc)
    except (OverflowError, ValueError):  # 0001-01-01T00:00+01:00 is before year 1 in UTC
        raise ValidationError(f"{option} {value!r:.40} is out of range") from None
