"""`mindstore stats ...` through typer's CliRunner on an embedded data file (`--data`),
checked against the analytics API run on a store loaded from the same snapshot.

The analytics themselves are tested in test_analytics_reports.py; here the question is
only whether the CLI passes options through, prints the rows it got, and fails cleanly.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import re
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import mindstore
from mindstore.backends.snapshot import load_snapshot, save_snapshot
from mindstore.cli import app
from mindstore.workload import WorkloadSpec, generate, load

runner = CliRunner()

SPEC = WorkloadSpec(tenants=2, owners_per_tenant=3, tasks=20, mean_messages=20, seed=4)
TENANT = "tenant-0"
OWNER = "tenant-0-user-1"
EMPTY_RANGE = ("--since", "2000-01-01", "--until", "2000-01-02T00:00:00Z")

USAGE_MEASURES = ["messages", "tokens_in", "tokens_out", "cache_reads", "cache_writes", "cost"]
LATENCY_MEASURES = ["count", "mean", "min", "p50", "p90", "p99", "max"]
TOOL_MEASURES = ["calls", "results", "errors", "error_rate"]
OWNER_COLUMNS = ["owner", "tasks", *USAGE_MEASURES]
SUBTASK_COLUMNS = ["depth", "spans", "finished", "open", "messages", "duration_p50", "duration_p90",
                   "duration_p99", "duration_max", "duration_mean"]  # fmt: skip
ACTIVITY_COLUMNS = ["period", "tasks_created", "messages", "active_owners"]
LIST_COMMANDS = ["usage", "latency", "tools", "subtasks", "owners", "activity"]
ALL_COMMANDS = [*LIST_COMMANDS, "sessions"]


async def _seed(path: Path) -> None:
    store = await mindstore.connect("embedded", database="cli_stats")
    try:
        await load(store, generate(SPEC))
        await save_snapshot(store.database, path)
    finally:
        await store.close()


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cli_stats") / "store.gz"
    asyncio.run(_seed(path))
    return path


@pytest.fixture(autouse=True)
def no_tenant_env(monkeypatch) -> None:
    monkeypatch.delenv("MINDSTORE_TENANT", raising=False)


@pytest.fixture(scope="module")
def api(data: Path) -> Iterator[Callable[..., Any]]:
    """What the analytics API returns on one store loaded from the same snapshot (its own
    loop, opened once: the CLI runs `asyncio.run` per command and must not share it)."""
    loop = asyncio.new_event_loop()
    store = loop.run_until_complete(mindstore.connect("embedded", database="cli_stats_expected"))
    loop.run_until_complete(load_snapshot(store.database, data))

    def report(query: Callable[[Any], Awaitable[Any]], tenant: str = TENANT) -> Any:
        return loop.run_until_complete(query(store.scoped(tenant).analytics))

    try:
        yield report
    finally:
        loop.run_until_complete(store.close())
        loop.close()


def dumped(rows: Sequence[Any], columns: Sequence[str]) -> list[dict[str, Any]]:
    return [{c: row.model_dump(mode="json")[c] for c in columns} for row in rows]


def invoke(data: Path, *args: str, env: dict[str, str] | None = None):
    return runner.invoke(app, ["--data", str(data), "stats", *args], env=env)


def ok(data: Path, *args: str) -> Any:
    result = invoke(data, *args)
    assert result.exit_code == 0, result.output
    return result


def as_json(data: Path, command: str, *args: str) -> Any:
    return json.loads(ok(data, command, "--tenant", TENANT, *args, "--format", "json").stdout)


def as_csv(data: Path, command: str, *args: str) -> tuple[list[str], list[dict[str, str]]]:
    reader = csv.DictReader(
        io.StringIO(ok(data, command, "--tenant", TENANT, *args, "-f", "csv").stdout)
    )
    rows = list(reader)
    return list(reader.fieldnames or []), rows


def as_table(data: Path, command: str, *args: str) -> str:
    return ok(data, command, "--tenant", TENANT, *args).stdout


# ---------------------------------------------------------------------- usage and latency
GROUPINGS = [
    ([], ("model",), None),
    (["--by", "owner"], ("owner",), None),
    (["--by", "owner,model"], ("owner", "model"), None),
    (["--by", "model", "--by", "owner", "--by", "model"], ("model", "owner"), None),
    (["--period", "week"], ("model",), "week"),
    (["--by", "owner", "--period", "day"], ("owner",), "day"),
]


@pytest.mark.parametrize(("args", "dims", "period"), GROUPINGS)
def test_usage_json_is_the_api_rows_with_the_asked_columns(data, args, dims, period, api):
    expected = api(lambda a: a.usage(group_by=dims, period=period))
    columns = [*(["period"] if period else []), *dims, *USAGE_MEASURES]
    rows = as_json(data, "usage", *args)
    assert rows == dumped(expected, columns) and rows
    assert all(list(row) == columns for row in rows)


@pytest.mark.parametrize(("args", "dims", "period"), GROUPINGS)
def test_latency_json_is_the_api_rows_with_the_asked_columns(data, args, dims, period, api):
    expected = api(lambda a: a.latency(group_by=dims, period=period))
    columns = [*(["period"] if period else []), *dims, *LATENCY_MEASURES]
    assert as_json(data, "latency", *args) == dumped(expected, columns) and expected


def test_usage_and_latency_csv_and_table(data, api):
    models = [r.model for r in api(lambda a: a.usage())]
    header, rows = as_csv(data, "usage")
    assert header == ["model", *USAGE_MEASURES] and [r["model"] for r in rows] == models
    table = as_table(data, "usage")
    assert (
        all(model in table for model in models) and "cache_writes" in table and "owner" not in table
    )
    owners = [r.owner for r in api(lambda a: a.latency(group_by=("owner",)))]
    header, rows = as_csv(data, "latency", "--by", "owner")
    assert header == ["owner", *LATENCY_MEASURES] and [r["owner"] for r in rows] == owners
    assert all(owner in as_table(data, "latency", "--by", "owner") for owner in owners)


def test_period_week_labels_every_row_with_an_iso_week(data):
    rows = as_json(data, "usage", "--period", "week", "--by", "owner")
    assert rows and all(re.fullmatch(r"\d{4}-W\d{2}", r["period"]) for r in rows)
    assert list(rows[0])[:2] == ["period", "owner"]


# ---------------------------------------------------------------------- filters
FILTERS = [
    ["--owner", OWNER],
    ["--state", "completed"],
    ["--model", "openai/gpt-4o"],
    ["--since", "2026-10-08", "--until", "2026-10-15T12:00:00Z"],
    ["--since", "1791331200"],  # 2026-10-07 as epoch seconds
]


def _filter_kwargs(args: list[str]) -> dict[str, Any]:
    return {
        name.removeprefix("--"): value for name, value in zip(args[::2], args[1::2], strict=True)
    }


@pytest.mark.parametrize("args", FILTERS)
def test_filters_pass_through_to_every_report(data, args, api):
    kwargs = _filter_kwargs(args)
    usage = api(lambda a: a.usage(**kwargs))
    assert as_json(data, "usage", *args) == dumped(usage, ["model", *USAGE_MEASURES])
    assert usage != api(lambda a: a.usage())  # the filter did select something else
    owners = api(lambda a: a.top_owners(**kwargs))
    assert as_json(data, "owners", *args) == dumped(owners, OWNER_COLUMNS)
    sessions = api(lambda a: a.sessions(**kwargs))
    assert as_json(data, "sessions", *args) == sessions.model_dump(mode="json")
    activity = api(lambda a: a.activity(**kwargs))
    assert as_json(data, "activity", *args) == [r.model_dump(mode="json") for r in activity]


def test_owner_filter_keeps_only_that_owner(data):
    rows = as_json(data, "usage", "--by", "owner", "--owner", OWNER)
    assert [r["owner"] for r in rows] == [OWNER]
    assert [r["owner"] for r in as_json(data, "owners", "--owner", OWNER)] == [OWNER]


@pytest.mark.parametrize("command", LIST_COMMANDS)
def test_an_empty_range_gives_no_rows(data, command):
    assert as_json(data, command, *EMPTY_RANGE) == []
    result = ok(data, command, "--tenant", TENANT, *EMPTY_RANGE)
    assert "no data for these filters" in result.stderr and "┃" in result.stdout  # the empty table


def test_an_empty_csv_is_just_its_header(data):
    assert as_csv(data, "usage", "--by", "owner", *EMPTY_RANGE) == (["owner", *USAGE_MEASURES], [])
    assert as_csv(data, "subtasks", *EMPTY_RANGE) == (SUBTASK_COLUMNS, [])


def test_an_empty_range_gives_the_empty_session_report(data, api):
    report = as_json(data, "sessions", *EMPTY_RANGE)
    assert report["sessions"] == 0 and report["messages"]["count"] == 0
    expected = api(lambda a: a.sessions(since=EMPTY_RANGE[1], until=EMPTY_RANGE[3]))
    assert report == expected.model_dump(mode="json")
    assert (
        "no data for these filters" in ok(data, "sessions", "--tenant", TENANT, *EMPTY_RANGE).stderr
    )


def test_tenants_are_reported_apart(data, api):
    other = api(lambda a: a.usage(), tenant="tenant-1")
    result = invoke(data, "usage", "--format", "json", env={"MINDSTORE_TENANT": "tenant-1"})
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == dumped(other, ["model", *USAGE_MEASURES])
    assert json.loads(result.stdout) != as_json(data, "usage")


# ---------------------------------------------------------------------- tools
@pytest.mark.parametrize(("args", "dims", "period"), [
    ([], (), None), (["--by", "model"], ("model",), None), (["--period", "week"], (), "week"),
])  # fmt: skip
def test_tools_json_keeps_the_raw_error_rate(data, args, dims, period, api):
    expected = api(lambda a: a.tools(group_by=dims, period=period))
    columns = ["tool", *(["period"] if period else []), *dims, *TOOL_MEASURES]
    assert as_json(data, "tools", *args) == dumped(expected, columns) and expected


def test_tools_table_shows_percentages_and_csv_fractions(data, api):
    expected = api(lambda a: a.tools())
    table = as_table(data, "tools")
    for row in expected:
        assert row.tool in table
        if row.error_rate is not None:
            assert f"{row.error_rate:.1%}" in table
    header, rows = as_csv(data, "tools")
    assert header == ["tool", *TOOL_MEASURES] and len(rows) == len(expected)
    assert [r["error_rate"] for r in rows] == ["" if r.error_rate is None else str(r.error_rate)
                                               for r in expected]  # fmt: skip
    assert "%" not in "".join(r["error_rate"] for r in rows)


# ---------------------------------------------------------------------- sessions
def test_sessions_json_is_the_report(data, api):
    expected = api(lambda a: a.sessions())
    assert as_json(data, "sessions") == expected.model_dump(mode="json") and expected.sessions


def test_sessions_csv_is_the_length_histogram(data, api):
    expected = api(lambda a: a.sessions())
    header, rows = as_csv(data, "sessions")
    assert header == ["low", "high", "sessions"]
    assert rows == [{"low": str(b.low), "high": "" if b.high is None else str(b.high),
                     "sessions": str(b.sessions)} for b in expected.length_histogram]  # fmt: skip


def test_sessions_table_has_the_summary_and_the_bins(data):
    table = as_table(data, "sessions")
    for label in ("messages", "duration (s)", "count", "p99", "0", "1-9", "10-24", "1000+"):
        assert label in table


# ---------------------------------------------------------------------- subtasks
def _flat_subtask(row: Any) -> dict[str, Any]:
    duration = row.duration.model_dump(mode="json")
    flat = {f"duration_{name}": duration[name] for name in ("p50", "p90", "p99", "max", "mean")}
    return {"depth": row.depth, "spans": row.spans, "finished": row.finished, "open": row.open,
            "messages": row.messages, **flat}  # fmt: skip


def test_subtasks_json_csv_and_table(data, api):
    expected = api(lambda a: a.subtasks())
    assert as_json(data, "subtasks") == [_flat_subtask(r) for r in expected] and expected
    header, rows = as_csv(data, "subtasks")
    assert header == SUBTASK_COLUMNS and [int(r["depth"]) for r in rows] == [
        r.depth for r in expected
    ]
    table = as_table(data, "subtasks")
    assert "duration_p90" in table and all(f"│ {r.depth} " in table for r in expected)


# ---------------------------------------------------------------------- owners
@pytest.mark.parametrize(("args", "limit", "by"), [
    ([], 10, "cost"), (["--limit", "2", "--by", "tokens_out"], 2, "tokens_out")])  # fmt: skip
def test_owners_json_is_the_ranking(data, args, limit, by, api):
    expected = api(lambda a: a.top_owners(limit=limit, by=by))
    assert as_json(data, "owners", *args) == dumped(expected, OWNER_COLUMNS) and expected
    assert len(expected) <= limit


def test_owners_csv_and_table(data, api):
    expected = [r.owner for r in api(lambda a: a.top_owners())]
    header, rows = as_csv(data, "owners")
    assert header == OWNER_COLUMNS and [r["owner"] for r in rows] == expected
    assert all(owner in as_table(data, "owners") for owner in expected)


# ---------------------------------------------------------------------- activity
@pytest.mark.parametrize("period", ["day", "week", "month"])
def test_activity_json_keeps_by_role(data, period, api):
    expected = api(lambda a: a.activity(period=period))
    args = [] if period == "day" else ["--period", period]
    assert (
        as_json(data, "activity", *args) == [r.model_dump(mode="json") for r in expected]
        and expected
    )


def test_activity_csv_and_table_have_a_column_per_role(data, api):
    expected = api(lambda a: a.activity(period="week"))
    roles = sorted({role for row in expected for role in row.by_role})
    header, rows = as_csv(data, "activity", "--period", "week")
    assert header == [*ACTIVITY_COLUMNS, *roles] and len(rows) == len(expected)
    for row, want in zip(rows, expected, strict=True):
        assert row["period"] == want.period and int(row["messages"]) == want.messages
        assert {role: int(row[role]) for role in roles} == {
            r: want.by_role.get(r, 0) for r in roles
        }
    table = as_table(data, "activity", "--period", "week")
    assert all(row.period in table for row in expected) and all(role in table for role in roles)


# ---------------------------------------------------------------------- errors
BAD_INPUT = [
    ["usage", "--by", "tool"],
    ["usage", "--by", "model,period"],
    ["latency", "--by", "owner,nobody"],
    ["tools", "--by", "owner"],
    ["usage", "--period", "year"],
    ["tools", "--period", "hour"],
    ["activity", "--period", "fortnight"],
    ["owners", "--by", "messages"],
    ["owners", "--limit", "0"],
    ["usage", "--since", "last tuesday"],
    ["sessions", "--until", "2026-13-01"],
    ["subtasks", "--since", "2026-10-10", "--until", "2026-10-01"],
    ["activity", "--state", "sleeping"],
]


@pytest.mark.parametrize("args", BAD_INPUT, ids=lambda args: " ".join(args))
def test_bad_input_exits_2_with_one_line(data, args):
    result = invoke(data, *args, "--tenant", TENANT)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error:") and result.stderr.count("\n") == 1
    assert result.stdout == ""


@pytest.mark.parametrize("command", ALL_COMMANDS)
def test_missing_tenant_exits_7(data, command):
    result = invoke(data, command)
    assert result.exit_code == 7
    assert result.stderr.startswith("error:") and "--tenant" in result.stderr


def test_stats_never_rewrite_the_data_file(data):
    before = data.read_bytes()
    for command in ALL_COMMANDS:  # every format takes the same read-only path
        ok(data, command, "--tenant", TENANT, "-f", "json")
    ok(data, "usage", "--tenant", TENANT, "--by", "owner,model", "--period", "week")
    invoke(data, "usage", "--tenant", TENANT, "--since", "never")
    assert data.read_bytes() == before


def test_help_lists_every_report():
    result = runner.invoke(app, ["stats", "--help"])
    assert result.exit_code == 0
    assert all(command in result.stdout for command in ALL_COMMANDS)
