"""Explicit defaults: a store kept nowhere says so, unless it was asked for by name.

`connect()` with no URI and no ``MINDSTORE_URI`` opens the in-memory store and warns once
per process (`InMemoryStoreWarning`); ``connect("memory:")`` and its aliases are silent.
The CLI says on stderr when it works on a new, empty in-memory store. These tests are
about the default itself, so they call `connect` rather than use the `store` fixture.
"""

from __future__ import annotations

import asyncio
import io
import warnings
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

import mindstore
from mindstore.backends import connection
from mindstore.backends.connection import MEMORY_URI, InMemoryStoreWarning, open_backend
from mindstore.cli import app

runner = CliRunner()


@pytest.fixture
def first_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """No MINDSTORE_URI, and this "process" has not warned yet."""
    monkeypatch.delenv("MINDSTORE_URI", raising=False)
    monkeypatch.setattr(connection, "_warned_in_memory", False)


def in_memory_warnings(caught: list[warnings.WarningMessage]) -> list[warnings.WarningMessage]:
    return [w for w in caught if issubclass(w.category, InMemoryStoreWarning)]


async def test_connect_without_a_uri_warns_once_per_process(first_time: None) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # repeats would show: the once is mindstore's own
        first = await mindstore.connect()
        second = await mindstore.connect()
        third = await open_backend()
    [warning] = in_memory_warnings(caught)
    text = str(warning.message)
    assert "MINDSTORE_URI" in text and "connect('memory:')" in text and "lost" in text
    assert warning.filename == __file__  # points at the caller's line, not at mindstore
    assert first.kind == second.kind == "embedded" and third.is_embedded
    for store in (first, second):
        await store.close()
    await third.close()


async def test_the_warning_points_at_whoever_called_open_backend(first_time: None) -> None:
    with pytest.warns(InMemoryStoreWarning) as record:
        backend = await open_backend()
    assert record[0].filename == __file__
    await backend.close()


@pytest.mark.parametrize(
    "uri",
    [MEMORY_URI, "MEMORY:", " memory: ", "memory", "embedded", "mongomock", "mongomock://x/db"],
)
async def test_asking_for_memory_by_name_is_silent(first_time: None, uri: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        store = await mindstore.connect(uri)
    assert store.kind == "embedded"
    await store.close()
    assert connection._warned_in_memory is False  # the default's warning is still to come
    with pytest.warns(InMemoryStoreWarning):
        await (await mindstore.connect()).close()


@pytest.mark.parametrize("uri", [MEMORY_URI, "embedded", "mongomock://localhost/fromenv"])
async def test_memory_named_in_the_environment_is_silent(
    first_time: None, monkeypatch: pytest.MonkeyPatch, uri: str
) -> None:
    monkeypatch.setenv("MINDSTORE_URI", uri)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        store = await mindstore.connect()
    assert store.kind == "embedded"
    await store.close()


async def test_under_an_error_filter_every_default_connect_raises(first_time: None) -> None:
    """Once per process means once *shown*: an application that made the warning an error
    gets the error on every bare connect, not only on the first."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", InMemoryStoreWarning)
        for _ in range(2):
            with pytest.raises(InMemoryStoreWarning):
                await mindstore.connect()


async def test_a_mongodb_uri_does_not_warn(first_time: None) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", InMemoryStoreWarning)
        with pytest.raises(mindstore.ConfigurationError, match="cannot reach MongoDB"):
            await mindstore.connect("mongodb://127.0.0.1:1/db?serverSelectionTimeoutMS=50")


async def test_the_demo_asks_for_memory_by_name(first_time: None) -> None:
    from mindstore.demo import scenario

    with warnings.catch_warnings():
        warnings.simplefilter("error", InMemoryStoreWarning)
        summary = await scenario(Console(file=io.StringIO(), width=160))
    assert summary["messages"] == 13


def test_the_warning_is_public_and_shown_by_default() -> None:
    assert mindstore.InMemoryStoreWarning is InMemoryStoreWarning
    assert issubclass(InMemoryStoreWarning, UserWarning)  # Python's default filters show it


# ----------------------------------------------------------------------------- the CLI


def test_the_cli_says_when_it_reads_an_empty_in_memory_store(first_time: None) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = runner.invoke(app, ["tasks", "list", "--tenant", "acme"])
    assert result.exit_code == 0, result.output
    assert "a new, empty in-memory store" in result.stderr
    assert "no --uri, --data or MINDSTORE_URI" in result.stderr and "--data FILE" in result.stderr
    assert in_memory_warnings(caught) == []  # the CLI's own note, not Python's warning
    assert "┃ id" in result.stdout  # the empty table itself is unchanged


def test_the_cli_says_it_for_memory_asked_by_name_too(first_time: None) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = runner.invoke(app, ["--uri", "memory:", "stats", "usage", "--tenant", "acme"])
    assert result.exit_code == 0, result.output
    assert "'memory:' is a new, empty in-memory store" in result.stderr
    assert in_memory_warnings(caught) == []


def test_the_cli_is_quiet_about_memory_with_a_data_file(first_time: None, tmp_path: Path) -> None:
    data = tmp_path / "store.gz"

    async def fill() -> None:
        from mindstore.backends.snapshot import save_snapshot

        store = await mindstore.connect(MEMORY_URI)
        await store.scoped("acme").tasks.create(owner="ann", title="kept")
        await save_snapshot(store.database, data)
        await store.close()

    asyncio.run(fill())
    for uri in ([], ["--uri", "memory:"], ["--uri", "embedded"]):
        args = [*uri, "--data", str(data), "tasks", "list", "--tenant", "acme"]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, (uri, result.output)
        assert "in-memory" not in result.stderr and "kept" in result.stdout


def test_the_cli_refuses_a_data_file_with_a_server_uri(tmp_path: Path) -> None:
    data = tmp_path / "store.gz"
    server = ["--uri", "mongodb://db:27017/x"]
    result = runner.invoke(app, [*server, "--data", str(data), "tasks", "list", "--tenant", "a"])
    assert result.exit_code == 7 and "--data works with the embedded store only" in result.stderr
    assert not data.exists()
