"""The store's clock: what `created_at`, `updated_at` and other document times are stamped
with, and how a stored time is read back (`as_utc`)."""

from __future__ import annotations

from datetime import UTC, datetime

from mindstore.draws import draw

__all__ = ["as_utc", "utcnow"]


def utcnow() -> datetime:
    """Now in UTC, to the millisecond, because that is what BSON dates keep: a time read
    back equals the time written. The retry of an operation whose outcome is unknown gets
    the times its earlier attempt drew (`mindstore.draws`)."""
    return draw("time", _now)


def _now() -> datetime:
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def as_utc(value: datetime) -> datetime:
    """A stored time as an aware UTC datetime. MongoDB keeps UTC milliseconds; mongomock
    hands back its own tzinfo or none at all."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)
