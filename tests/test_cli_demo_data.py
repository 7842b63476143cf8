"""`mindstore demo-data` and the CLI's store options, in-process (typer's CliRunner)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from typer.testing import CliRunner

import mindstore
from mindstore.backends.snapshot import load_snapshot
from mindstore.cli import app
from mindstore.workload import WorkloadSpec, generate

runner = CliRunner()
SMALL = ["--tenants", "2", "--owners", "2", "--tasks", "12", "--messages", "12", "--seed", "9"]
SMALL_SPEC = WorkloadSpec(tenants=2, owners_per_tenant=2, tasks=12, mean_messages=12, seed=9)


def stored_counts(path: Path) -> dict[str, dict[str, int]]:
    async def read() -> dict[str, dict[str, int]]:
        store = await mindstore.connect("embedded", database="check")
        try:
            await load_snapshot(store.database, path)
            counts: dict[str, dict[str, int]] = {}
            for name in ("tasks", "dialog_nodes"):
                for doc in (
                    await store.database[name].find({}, {"tenant": 1, "seq": 1}).to_list(None)
                ):
                    per = counts.setdefault(name, {})
                    per[doc["tenant"]] = per.get(doc["tenant"], 0) + 1
            return counts
        finally:
            await store.close()

    return asyncio.run(read())


def test_demo_data_fills_a_data_file_that_later_commands_read(tmp_path):
    data = tmp_path / "demo.gz"
    result = runner.invoke(app, ["--data", str(data), "demo-data", *SMALL])
    assert result.exit_code == 0, result.output
    expected = generate(SMALL_SPEC)
    assert f"loaded {len(expected.tasks)} tasks" in result.output
    assert f"{expected.message_count} messages" in result.output
    counts = stored_counts(data)
    assert sum(counts["tasks"].values()) == len(expected.tasks)
    assert set(counts["tasks"]) == {"tenant-0", "tenant-1"}
    assert sum(counts["dialog_nodes"].values()) == len(expected.nodes)

    listed = runner.invoke(
        app, ["--data", str(data), "tasks", "list", "--tenant", "tenant-1", "-f", "json"]
    )
    assert listed.exit_code == 0, listed.output
    assert '"owner": "tenant-1-user-' in listed.output


def test_same_seed_twice_is_refused_and_leaves_the_file_alone(tmp_path):
    data = tmp_path / "demo.gz"
    assert runner.invoke(app, ["--data", str(data), "demo-data", *SMALL]).exit_code == 0
    before = data.read_bytes()
    again = runner.invoke(app, ["--data", str(data), "demo-data", *SMALL])
    assert again.exit_code == 4
    assert "already in this store" in again.output and "--seed" in again.output
    assert data.read_bytes() == before
    other = runner.invoke(app, ["--data", str(data), "demo-data", *SMALL[:-1], "10"])
    assert other.exit_code == 0, other.output
    seed_10 = generate(
        WorkloadSpec(tenants=2, owners_per_tenant=2, tasks=12, mean_messages=12, seed=10)
    )
    assert sum(stored_counts(data)["tasks"].values()) == len(generate(SMALL_SPEC).tasks) + len(
        seed_10.tasks
    )


def test_demo_data_without_somewhere_to_keep_it_is_refused(monkeypatch):
    monkeypatch.delenv("MINDSTORE_URI", raising=False)
    result = runner.invoke(app, ["demo-data", *SMALL])
    assert result.exit_code == 7
    assert "--data FILE" in result.output


def test_bad_uri_and_bad_options_get_one_line_errors(tmp_path):
    result = runner.invoke(
        app, ["--uri", "postgres://db.example/x", "tasks", "list", "--tenant", "t"]
    )
    assert result.exit_code == 7
    assert "unsupported database URI" in result.output and "mongodb://" in result.output
    result = runner.invoke(app, ["--uri", "mongodb://", "tasks", "list", "--tenant", "t"])
    assert result.exit_code == 7 and "error:" in result.output
    result = runner.invoke(app, ["--data", str(tmp_path / "d.gz"), "demo-data", "--tasks", "0"])
    assert result.exit_code == 2
