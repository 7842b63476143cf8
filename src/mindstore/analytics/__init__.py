"""Analytics over stored sessions: usage and cost, tools, latency, sessions, sub-tasks,
activity. `store.scoped(tenant).analytics` is the entry point; see docs/analytics.md."""

from mindstore.analytics.periods import Period
from mindstore.analytics.rows import (
    ActiveOwnersRow,
    ActivityRow,
    HistogramBin,
    LatencyRow,
    OwnerRow,
    SessionReport,
    SubtaskRow,
    ToolRow,
    UsageRow,
)
from mindstore.analytics.service import Analytics
from mindstore.analytics.stats import Distribution

__all__ = [
    "ActiveOwnersRow",
    "ActivityRow",
    "Analytics",
    "Distribution",
    "HistogramBin",
    "LatencyRow",
    "OwnerRow",
    "Period",
    "SessionReport",
    "SubtaskRow",
    "ToolRow",
    "UsageRow",
]
