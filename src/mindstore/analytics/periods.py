"""Periods and time bounds for reports (pure).

Pipelines bucket time by UTC day (epoch seconds of the day start); this module names the
day, ISO week or month a day belongs to, and turns what callers pass as a time bound
(datetime, date, epoch seconds, ISO 8601 text) into epoch seconds.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from enum import Enum

from mindstore.errors import ValidationError
from mindstore.validation import MAX_TIMESTAMP, check_timestamp

TimeBound = datetime | date | int | float | str | None


class Period(str, Enum):
    day = "day"
    week = "week"
    month = "month"


def period_key(day_start: float | None, period: Period | None) -> str | None:
    """The label of the period a UTC day falls in: 2026-10-05, 2026-W41 or 2026-10."""
    if period is None or day_start is None:
        return None
    day = datetime.fromtimestamp(int(day_start), tz=UTC).date()
    if period == Period.day:
        return day.isoformat()
    if period == Period.week:
        year, week, _ = day.isocalendar()
        return f"{year}-W{week:02d}"
    return f"{day.year}-{day.month:02d}"


def to_period(value: Period | str | None) -> Period | None:
    if value is None or isinstance(value, Period):
        return value
    try:
        return Period(value)
    except ValueError:
        raise ValidationError(f"unknown period {value!r}; choose from day, week, month") from None


def _finite_seconds(value: int | float, name: str) -> float:
    """Epoch seconds a datetime can hold (0 to the end of year 9999), never NaN or inf."""
    try:
        return float(check_timestamp(value, name) or 0.0)
    except OverflowError:
        raise ValidationError(f"{name} is out of range: {value!r}") from None


FIRST_MOMENT = datetime(1, 1, 1, tzinfo=UTC).timestamp()
"""Epoch seconds of the first moment a datetime holds (year 1, UTC)."""


def _moment_seconds(moment: datetime, name: str) -> float:
    """Epoch seconds of an aware datetime, refused (naming `name`) when its UTC time falls
    outside the years 1 to 9999 (`0001-01-01T00:00:00+14:00`, `9999-12-31T23:59:59-14:00`),
    which no later step could turn back into a datetime."""
    try:
        seconds = moment.timestamp()
    except (OverflowError, ValueError):
        seconds = None
    if seconds is None or not FIRST_MOMENT <= seconds <= MAX_TIMESTAMP:
        raise ValidationError(f"{name} is out of range: {moment.isoformat()}")
    return seconds


def epoch_seconds(value: TimeBound, name: str = "time") -> float | None:
    """Epoch seconds of a time bound; naive datetimes and dates are taken as UTC."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValidationError(f"{name} must be a time, not a boolean")
    if isinstance(value, (int, float)):
        return _finite_seconds(value, name)
    if isinstance(value, str):
        text = value.strip()
        try:
            number = float(text)
        except ValueError:
            number = None
        if number is not None:
            return _finite_seconds(number, name)
        try:
            value = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise ValidationError(
                f"{name} {value!r} is not a time: use ISO 8601 (2026-10-05 or "
                f"2026-10-05T12:00:00Z) or epoch seconds"
            ) from None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return _moment_seconds(value, name)
    if isinstance(value, date):
        return _moment_seconds(datetime(value.year, value.month, value.day, tzinfo=UTC), name)
    raise ValidationError(f"{name} must be a datetime, date, epoch seconds or ISO 8601 text")
