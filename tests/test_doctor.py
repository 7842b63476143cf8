"""`mindstore doctor` (`mindstore.diagnosis`) and `search-index create-vector-index`: what
the store's description says on the embedded backend and, against scripted server
replies, on a server; a broken embedder is a failing check (exit 1); the vector index is
refused where there is none and asked for with the documented command elsewhere."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pymongo.errors import OperationFailure
from typer.testing import CliRunner

import mindstore
from mindstore.cli import app
from mindstore.diagnosis import NO_EMBEDDER, PROBE, diagnose
from mindstore.errors import ConfigurationError, ValidationError
from mindstore.search import HashingEmbedder
from mindstore.search.embedder import Purpose
from mindstore.search.vector_server import (
    IN_PROCESS,
    ON_SERVER,
    VectorPath,
    create_vector_index,
    vector_index_command,
)

runner = CliRunner()


def doctor_rows(*options: str) -> tuple[int, dict[str, dict[str, str]]]:
    result = runner.invoke(app, [*options, "doctor", "-f", "json"])
    rows = json.loads(result.stdout)
    return result.exit_code, {row["check"]: row for row in rows}


def test_the_doctor_describes_an_embedded_store() -> None:
    code, rows = doctor_rows()
    assert code == 0
    assert list(rows) == ["versions", "backend", "vector search", "embedder", "keyring"]
    assert rows["versions"]["detail"].startswith("mindstore ")
    assert rows["backend"]["status"] == "note" and "embedded" in rows["backend"]["detail"]
    assert rows["vector search"]["detail"].startswith(IN_PROCESS)
    assert rows["embedder"] == {"check": "embedder", "status": "note", "detail": NO_EMBEDDER}
    assert rows["keyring"]["status"] == "note"


def test_the_doctor_probes_the_embedder_and_sees_the_keyring(tmp_path: Path) -> None:
    key = tmp_path / "master.key"
    key.write_text("ab" * 32)
    code, rows = doctor_rows("--embedder", "hashing:48", "--master-key", str(key))
    assert code == 0
    assert rows["embedder"]["status"] == "ok"
    assert rows["embedder"]["detail"].startswith("mindstore-hashing-v1-48, 48 dimensions")
    assert rows["keyring"]["status"] == "ok"


class WrongSize:
    """An embedder that promises 8 dimensions and answers with 5 (or with NaN)."""

    model = "broken-model"
    dimensions = 8
    batch_size = 4

    def __init__(self, value: float = 1.0) -> None:
        self.value = value
        self.asked: list[tuple[list[str], Purpose]] = []

    async def embed(self, texts: Sequence[str], *, purpose: Purpose) -> list[list[float]]:
        self.asked.append((list(texts), purpose))
        return [[self.value] * 5 for _ in texts]


class Raises(WrongSize):
    async def embed(self, texts: Sequence[str], *, purpose: Purpose) -> list[list[float]]:
        raise TimeoutError("the provider did not answer")


@pytest.mark.parametrize("embedder", [WrongSize(), WrongSize(math.nan), Raises()])
async def test_an_embedder_that_breaks_its_promise_fails_the_check(embedder: WrongSize) -> None:
    store = await mindstore.connect("embedded", embedder=embedder)
    try:
        (finding,) = [f for f in await diagnose(store) if f.check == "embedder"]
    finally:
        await store.close()
    assert finding.status == "fail" and finding.detail.startswith("broken-model: ")
    if not isinstance(embedder, Raises):
        assert embedder.asked == [([PROBE], "query")]


def test_a_failing_check_makes_the_doctor_exit_1(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("mindstore.commands.common.build_embedder", lambda spec: Raises())
    code, rows = doctor_rows("--embedder", "hashing")
    assert code == 1 and rows["embedder"]["status"] == "fail"
    assert "TimeoutError: the provider did not answer" in rows["embedder"]["detail"]


class ServerDatabase:
    """A server's replies to the two commands the doctor sends (or a refusal)."""

    def __init__(self, hello: dict[str, Any] | None, version: str = "8.2.1") -> None:
        self.hello, self.version = hello, version
        self.sent: list[Any] = []

    async def command(self, command: Any) -> dict[str, Any]:
        self.sent.append(command)
        if self.hello is None:
            raise ConnectionError("refused")
        if command == "hello":
            return self.hello
        if command == "buildInfo":
            return {"version": self.version}
        return {"ok": 1}


def server_store(database: ServerDatabase, path: str = IN_PROCESS) -> Any:
    async def vector_path() -> VectorPath:
        return VectorPath(path, "scripted")

    return SimpleNamespace(backend=SimpleNamespace(is_embedded=False), database=database,
                           vector_path=vector_path, embedder=HashingEmbedder(16),
                           keyring=None)  # fmt: skip


@pytest.mark.parametrize(
    ("hello", "status", "detail"),
    [
        ({"setName": "rs0"}, "ok", "MongoDB 8.2.1, replica set 'rs0'"),
        ({"msg": "isdbgrid"}, "ok", "MongoDB 8.2.1, sharded (mongos)"),
        ({}, "note", "MongoDB 8.2.1, standalone (no transactions, no change streams)"),
        (None, "fail", "the server did not answer: ConnectionError"),
    ],
)
async def test_the_doctor_describes_a_server(
    hello: dict[str, Any] | None, status: str, detail: str
) -> None:
    database = ServerDatabase(hello)
    findings = {f.check: f for f in await diagnose(server_store(database, ON_SERVER))}
    assert (findings["backend"].status, findings["backend"].detail) == (status, detail)
    assert findings["vector search"].status == "ok"
    assert findings["embedder"].status == "ok"
    assert database.sent[:1] == ["hello"]


async def test_the_vector_index_is_asked_for_with_the_documented_command() -> None:
    database = ServerDatabase({})
    await create_vector_index(database, "mongodb", 384)
    assert database.sent == [vector_index_command(384)]


async def test_a_server_that_refuses_the_vector_index_is_a_configuration_error() -> None:
    class NoSearch(ServerDatabase):
        async def command(self, command: Any) -> dict[str, Any]:
            self.sent.append(command)
            raise OperationFailure("Search index commands are only supported with Atlas", 115)

    database = NoSearch({})
    with pytest.raises(ConfigurationError, match=r"refused createSearchIndexes: .*Atlas"):
        await create_vector_index(database, "mongodb", 384)
    assert database.sent == [vector_index_command(384)]


@pytest.mark.parametrize("dimensions", [0, -1, 8193, True, 1.5, "384", math.inf])
async def test_bad_dimensions_are_refused_before_anything_is_sent(dimensions: Any) -> None:
    database = ServerDatabase({})
    with pytest.raises(ValidationError, match="dimensions"):
        await create_vector_index(database, "mongodb", dimensions)
    assert database.sent == []


async def test_the_embedded_backend_has_no_vector_index_to_create() -> None:
    store = await mindstore.connect("embedded", embedder=HashingEmbedder(32))
    try:
        with pytest.raises(ConfigurationError, match="embedded backend has no vector index"):
            await store.create_vector_index()
    finally:
        await store.close()
    bare = await mindstore.connect("embedded")
    try:
        with pytest.raises(ConfigurationError, match="dimensions"):
            await bare.create_vector_index()
    finally:
        await bare.close()


@pytest.mark.parametrize(
    ("options", "code", "says"),
    [
        (["--dimensions", "64"], 7, "embedded backend has no vector index"),
        ([], 7, "dimensions: give them"),
        (["--dimensions", "0"], 2, "dimensions: a whole number"),
    ],
)
def test_the_create_vector_index_command_says_why_it_cannot(
    options: list[str], code: int, says: str
) -> None:
    result = runner.invoke(app, ["search-index", "create-vector-index", *options])
    assert result.exit_code == code and says in result.output, result.output
