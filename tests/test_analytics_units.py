"""The pure parts of analytics: distributions, periods, time bounds, pipeline builders and
folding, without a store."""

from __future__ import annotations

import math
from datetime import UTC, date, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mindstore.analytics import folding
from mindstore.analytics.periods import Period, epoch_seconds, period_key
from mindstore.analytics.stats import distribution, histogram
from mindstore.errors import ValidationError
from mindstore.pipelines import analytics as pipelines
from mindstore.pipelines.analytics import ReportFilter
from mindstore.portable import ALLOWED, operators

FILTER = ReportFilter(
    tenant="acme", owner="alice", state="running", model="m", since=10.0, until=99.0
)
ALL_PIPELINES = {
    "usage": pipelines.usage_pipeline(FILTER, ("period", "model", "owner")),
    "owners": pipelines.top_owners_pipeline(FILTER),
    "latency": pipelines.latency_pipeline(FILTER, ("period", "owner")),
    "tools": pipelines.tools_pipeline(FILTER, ("period", "model")),
    "sessions": pipelines.sessions_pipeline(FILTER),
    "subtasks": pipelines.subtasks_pipeline(FILTER),
    "activity": pipelines.message_activity_pipeline(FILTER),
    "created": pipelines.tasks_created_pipeline(FILTER),
}


@given(st.lists(st.integers(min_value=0, max_value=50), min_size=1, max_size=200))
def test_distribution_of_a_histogram_is_that_of_the_values(values):
    summary = distribution(histogram(values))
    ordered = sorted(values)
    for p in (50, 90, 99):
        rank = math.ceil(p / 100 * len(ordered))
        assert getattr(summary, f"p{p}") == ordered[rank - 1]
    assert (summary.count, summary.min, summary.max) == (len(values), ordered[0], ordered[-1])
    assert summary.mean == pytest.approx(sum(values) / len(values), abs=1e-6)


def test_nearest_rank_percentiles_are_observed_values():
    summary = distribution(histogram(range(1, 11)))
    assert (summary.p50, summary.p90, summary.p99) == (5, 9, 10)
    assert distribution({}).p50 is None and distribution({3: 0}).count == 0


@pytest.mark.parametrize("day, week, month", [
    (date(2026, 12, 31), "2026-W53", "2026-12"),
    (date(2027, 1, 1), "2026-W53", "2027-01"),
    (date(2027, 1, 4), "2027-W01", "2027-01"),
    (date(2021, 1, 3), "2020-W53", "2021-01"),
])  # fmt: skip
def test_period_keys_use_iso_weeks(day, week, month):
    start = datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()
    assert period_key(start, Period.day) == day.isoformat()
    assert period_key(start + 86399, Period.week) == week
    assert period_key(start, Period.month) == month
    assert period_key(start, None) is None


def test_time_bounds_accept_dates_datetimes_epochs_and_iso_text():
    noon = datetime(2026, 10, 5, 12, tzinfo=UTC).timestamp()
    assert epoch_seconds("2026-10-05T12:00:00Z") == noon
    assert epoch_seconds(datetime(2026, 10, 5, 12)) == noon  # naive = UTC
    assert epoch_seconds(date(2026, 10, 5)) == noon - 12 * 3600
    assert epoch_seconds(" 1790000000 ") == 1790000000.0 and epoch_seconds(None) is None
    for bad in ("next week", True, [1]):
        with pytest.raises(ValidationError):
            epoch_seconds(bad)  # type: ignore[arg-type]


def test_report_filter_refuses_bad_values():
    with pytest.raises(ValidationError, match="until must be later"):
        ReportFilter(tenant="a", since=5, until=5)
    with pytest.raises(ValidationError):
        ReportFilter(tenant="a", owner={"$ne": None})  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        ReportFilter(tenant="a", since="yesterday")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="cannot group by"):
        pipelines.usage_pipeline(ReportFilter(tenant="a"), ("tool",))
    with pytest.raises(ValidationError):
        pipelines.tools_pipeline(ReportFilter(tenant="a"), ("owner",))


@pytest.mark.parametrize("name", sorted(ALL_PIPELINES))
def test_pipelines_start_with_the_tenant_and_stay_portable(name):
    pipeline = ALL_PIPELINES[name]
    first = pipeline[0]["$match"]
    assert first["tenant"] == "acme" and first["owner"] == "alice" and first["state"] == "running"
    assert operators(pipeline) <= ALLOWED
    assert "$setWindowFields" not in operators(pipeline) and "$facet" not in operators(pipeline)


def test_a_time_range_reaches_the_messages_and_the_created_tasks():
    usage_match = pipelines.usage_pipeline(FILTER, ("model",))[3]["$match"]
    assert usage_match["messages.started_ts"] == {"$gte": 10.0, "$lt": 99.0}
    assert usage_match["messages.origin"] is None and usage_match["messages.model_id"] == "m"
    created = pipelines.tasks_created_pipeline(FILTER)[0]["$match"]["created_at"]
    assert created["$gte"] == datetime.fromtimestamp(10, tz=UTC)


def test_folding_merges_null_and_missing_keys_and_drops_empty_groups():
    day = datetime(2026, 10, 5, tzinfo=UTC).timestamp()
    groups = [
        {"_id": {"period": day, "model": None}, "messages": 2, "tokens_in": 5, "cost": 0.5},
        {"_id": {"period": day + 86400}, "messages": 1, "tokens_in": None, "cost": 0.25},
        {"_id": {}, "messages": 0, "tokens_in": 0, "cost": 0},  # mongomock's group over nothing
    ]
    rows = folding.fold_usage(groups, ("period", "model"), Period.week)
    assert [(r.period, r.model, r.messages, r.tokens_in, r.cost) for r in rows] == [
        ("2026-W41", None, 3, 5, 0.75)
    ]
    assert folding.fold_usage(groups[2:], (), None) == []


def test_session_length_bins_cover_every_session_once():
    bins = folding.length_bins({0: 2, 1: 1, 9: 1, 10: 4, 5000: 1})
    assert sum(b.sessions for b in bins) == 9
    assert (bins[0].low, bins[0].high, bins[0].sessions) == (0, 1, 2)
    assert (bins[-1].high, bins[-1].sessions) == (None, 1)
