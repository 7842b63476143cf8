"""`mindstore search` and `mindstore search-index rebuild|verify` on a snapshot file."""

from __future__ import annotations

import asyncio
import csv
import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import mindstore
from mindstore.backends.snapshot import save_snapshot
from mindstore.cli import app
from mindstore.collection_names import SEARCH_ENTRIES

runner = CliRunner()


async def _seed(path: Path) -> None:
    store = await mindstore.connect("embedded", database="cli_search")
    try:
        for tenant in ("acme", "globex"):
            view = store.scoped(tenant)
            task = await view.tasks.create(owner="alice")
            await view.tasks.add_human_message(task.id, f"{tenant} Lisbon hotel", message_id="m1")
            await view.tasks.add_human_message(task.id, "Porto train", message_id="m2")
            await view.tasks.add_human_message(task.id, "night bus", message_id="m3")
            await view.tasks.add_human_message(task.id, "night ferry", message_id="m4")
        await save_snapshot(store.database, path)
    finally:
        await store.close()


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "store.gz"
    asyncio.run(_seed(path))
    return path


def test_search_prints_hits_in_every_format(data: Path) -> None:
    out = runner.invoke(app, ["--data", str(data), "search", "lisbon", "--tenant", "acme",
                              "-f", "json"])  # fmt: skip
    assert out.exit_code == 0, out.output
    hits = json.loads(out.output)["hits"]
    assert [h["message_id"] for h in hits] == ["m1"] and "Lisbon" in hits[0]["snippet"]
    out = runner.invoke(app, ["--data", str(data), "search", "train", "--tenant", "acme",
                              "-f", "csv"])  # fmt: skip
    rows = list(csv.DictReader(io.StringIO(out.output)))
    assert [r["message_id"] for r in rows] == ["m2"]
    out = runner.invoke(app, ["--data", str(data), "search", "hotel", "--tenant", "acme"])
    assert out.exit_code == 0 and "**hotel**" in out.output


def test_a_bad_query_is_one_line_and_exit_2(data: Path) -> None:
    out = runner.invoke(app, ["--data", str(data), "search", "role:user", "--tenant", "acme"])
    assert out.exit_code == 2 and "query" in out.output


@pytest.mark.parametrize("query", ["tool:\udc80", "lisbon \udfff"])
def test_a_lone_surrogate_is_a_bad_argument_not_a_bug(data: Path, query: str) -> None:
    """A shell hands undecodable bytes over as lone surrogates: the usual exit 2."""
    out = runner.invoke(app, ["--data", str(data), "search", query, "--tenant", "acme"])
    assert out.exit_code == 2, out.output
    assert "query holds a lone surrogate" in out.output and "bug" not in out.output


def test_a_cursor_walks_its_tenant_only(data: Path) -> None:
    args = ["--data", str(data), "search", "night", "--limit", "1", "-f", "json"]
    out = runner.invoke(app, [*args, "--tenant", "acme"])
    assert out.exit_code == 0, out.output
    first = json.loads(out.output)
    out = runner.invoke(app, [*args, "--tenant", "acme", "--cursor", first["next_cursor"]])
    second = json.loads(out.output)
    assert out.exit_code == 0 and second["next_cursor"] is None
    assert {first["hits"][0]["message_id"], second["hits"][0]["message_id"]} == {"m3", "m4"}
    out = runner.invoke(app, [*args, "--tenant", "globex", "--cursor", first["next_cursor"]])
    assert out.exit_code == 2 and "cursor" in out.output


def test_search_index_verify_and_rebuild(data: Path) -> None:
    args = ["--data", str(data), "search-index"]
    out = runner.invoke(app, [*args, "rebuild", "--tenant", "acme"])
    assert out.exit_code == 0 and "indexed 4 messages" in out.output
    out = runner.invoke(app, [*args, "verify", "--tenant", "acme", "-f", "json"])
    assert out.exit_code == 0 and json.loads(out.output)["ok"] is True

    async def damage() -> None:
        from mindstore.backends.snapshot import load_snapshot

        store = await mindstore.connect("embedded", database="cli_search_damage")
        try:
            await load_snapshot(store.database, data)
            await store.database[SEARCH_ENTRIES].delete_many({"tenant": "acme"})
            await save_snapshot(store.database, data)
        finally:
            await store.close()

    asyncio.run(damage())
    out = runner.invoke(app, [*args, "verify", "--tenant", "acme", "-f", "json"])
    assert out.exit_code == 1 and json.loads(out.output)["missing"] == 4  # one chunk held 4
