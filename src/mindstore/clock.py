"""The store's clock: what `created_at`, `updated_at` and other document times are stamped
with."""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["utcnow"]


def utcnow() -> datetime:
    """Now in UTC, to the millisecond, because that is what BSON dates keep: a time read
    back equals the time written."""
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)
