"""The store's clock: what `created_at`, `updated_at` and other document times are stamped
with."""

from __future__ import annotations

from datetime import UTC, datetime

from mindstore.draws import draw

__all__ = ["utcnow"]


def utcnow() -> datetime:
    """Now in UTC, to the millisecond, because that is what BSON dates keep: a time read
    back equals the time written. The retry of an operation whose outcome is unknown gets
    the times its earlier attempt drew (`mindstore.draws`)."""
    return draw("time", _now)


def _now() -> datetime:
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)
