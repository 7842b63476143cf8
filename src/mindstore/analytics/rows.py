"""The typed rows analytics reports return (what `--format json|csv` prints, too)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from mindstore.analytics.stats import Distribution


class Row(BaseModel):
    model_config = ConfigDict(frozen=True)


class UsageSums(Row):
    """Usage summed over the task's own messages that carry usage (assistant turns and
    messages with a usage object); a turn without usage counts as a message with zeros."""

    messages: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cache_reads: int = 0
    cache_writes: int = 0
    cost: float = 0.0


class UsageRow(UsageSums):
    period: str | None = None
    model: str | None = None
    owner: str | None = None


class OwnerRow(UsageSums):
    owner: str | None = None
    tasks: int = 0
    """Tasks the owner's counted usage came from."""


class LatencyRow(Row):
    """Assistant response time in seconds (`finished_ts - started_ts`)."""

    period: str | None = None
    model: str | None = None
    owner: str | None = None
    count: int = 0
    mean: float | None = None
    min: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    max: float | None = None


class ToolRow(Row):
    tool: str | None = None
    period: str | None = None
    model: str | None = None
    calls: int = 0
    results: int = 0
    errors: int = 0
    error_rate: float | None = None
    """errors / results; None when no result is stored yet."""


class HistogramBin(Row):
    """Sessions with `low <= messages < high` (`high` None: no upper bound)."""

    low: int
    high: int | None
    sessions: int


class SessionReport(Row):
    sessions: int = 0
    messages: Distribution = Field(default_factory=Distribution)
    """Own messages per session (copies made by a fork are not the fork's messages)."""
    duration: Distribution = Field(default_factory=Distribution)
    """Seconds from the first own message's start to the last own message's end, over
    the sessions that have at least one own message."""
    length_histogram: list[HistogramBin] = Field(default_factory=list)


class SubtaskRow(Row):
    depth: int
    spans: int = 0
    finished: int = 0
    open: int = 0
    messages: int = 0
    """Messages of the sub-tasks' own levels (entry and exit included)."""
    duration: Distribution = Field(default_factory=Distribution)
    """Seconds from entry to exit, over the finished sub-tasks."""


class ActivityRow(Row):
    period: str | None = None
    tasks_created: int = 0
    messages: int = 0
    active_owners: int = 0
    by_role: dict[str, int] = Field(default_factory=dict)


class ActiveOwnersRow(Row):
    period: str | None = None
    active_owners: int = 0
    owners: list[str | None] = Field(default_factory=list)
