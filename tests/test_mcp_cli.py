"""`mindstore mcp`: spawned on stdio with `--data FILE` and driven by the official SDK's
stdio client (its owner scope holds, the file is not rewritten), and its option checks."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")

import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from typer.testing import CliRunner

import mindstore
from mindstore.backends.snapshot import save_snapshot
from mindstore.cli import app
from test_mcp import TOOL_NAMES, Planted, call, every_page, plant, refused

SRC = Path(__file__).resolve().parents[1] / "src"
ENV = {"PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
runner = CliRunner()


async def data_file(path: Path) -> Planted:
    async with await mindstore.connect("embedded") as store:
        planted = await plant(store)
        await save_snapshot(store.database, path)
    return planted


def test_stdio_serves_the_tenant_and_owner_named_on_the_command_line(tmp_path: Path) -> None:
    path = tmp_path / "store.gz"
    planted = asyncio.run(data_file(path))
    stored = path.read_bytes()
    command = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mindstore", "--data", str(path), "mcp", "--tenant", "acme", "--owner", "ann"],
        env=ENV,
    )

    async def session() -> None:
        async with Client(command) as client:
            assert [t.name for t in (await client.list_tools()).tools] == TOOL_NAMES
            hits = await every_page(client, "search_conversations", {"query": "lisbon"}, "hits")
            assert {(h["task_id"], h["index"]) for h in hits} == planted.containing(
                "lisbon", "acme", "ann"
            )
            listed = await every_page(client, "list_conversations", {}, "conversations")
            assert {c["task_id"] for c in listed} == planted.ids("acme", "ann")
            task_id = next(iter(planted.ids("acme", "ann")))
            read = await call(client, "read_conversation", {"task_id": task_id})
            assert [m["text"] for m in read["messages"]] == planted.tasks[task_id][2]
            for other in planted.ids("acme", "bob") | planted.ids("globex"):
                error = await refused(client, "read_conversation", {"task_id": other})
                assert (error["error"], error["argument"]) == ("NotFound", "task_id")

    asyncio.run(session())
    assert path.read_bytes() == stored  # read, never written back


def test_http_serves_with_the_fresh_token_it_prints_once(tmp_path: Path) -> None:
    """`--http PORT` without `--credentials`: one credential for `--tenant` and `--owner`,
    its token printed once on stderr; another token is 401."""
    path = tmp_path / "store.gz"
    planted = asyncio.run(data_file(path))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "mindstore", "--data", str(path), "mcp", "--tenant", "acme",
               "--owner", "ann", "--http", str(port)]  # fmt: skip
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **ENV},
    )  # fmt: skip
    try:
        assert process.stderr is not None
        said = [process.stderr.readline() for _ in range(2)]
        token = re.fullmatch(
            r"mcp: credential 'local' \(acme, owner ann\), bearer token: (\S+)\n", said[0]
        )
        assert token is not None, said
        url = f"http://127.0.0.1:{port}/mcp"
        assert said[1] == f"mcp: {url}\n"

        async def session() -> None:
            for _ in range(300):  # the socket opens once the store is loaded
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=1):
                        break
                except OSError:
                    await asyncio.sleep(0.05)
            headers = {"Authorization": f"Bearer {token[1]}"}
            async with (
                httpx2.AsyncClient(headers=headers) as http,
                Client(streamable_http_client(url, http_client=http)) as client,
            ):
                listed = await every_page(client, "list_conversations", {}, "conversations")
                assert {c["task_id"] for c in listed} == planted.ids("acme", "ann")
            async with httpx2.AsyncClient() as http:
                wrong = {"Authorization": f"Bearer {token[1][::-1]}"}
                assert (await http.post(url, json={}, headers=wrong)).status_code == 401

        asyncio.run(session())
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.mark.parametrize(
    ("args", "code", "said"),
    [
        (["mcp", "--credentials", "creds.json"], 2, "--http"),
        (["mcp", "--http", "8123", "--host", "0.0.0.0", "--tenant", "acme"], 2, "--allow-remote"),
        (["mcp", "--http", "0", "--tenant", "acme"], 2, "--http"),
        (
            ["mcp", "--http", "8123", "--credentials", "creds.json", "--tenant", "acme"],
            2,
            "--tenant",
        ),
        (["mcp", "--http", "8123", "--credentials", "missing.json"], 2, "missing.json"),
        (["mcp", "--http", "8123", "--credentials", "bad.json"], 7, "--credentials"),
        (["mcp", "--http", "8123"], 7, "tenant is required"),
        (["mcp"], 7, "tenant is required"),
        (["mcp", "--tenant", "acme/../x"], 2, "invalid tenant"),
    ],
)
def test_bad_options_are_refused_before_serving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], code: int, said: str
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MINDSTORE_TENANT", raising=False)
    (tmp_path / "creds.json").write_text(
        '[{"name": "a", "token": "a-long-enough-token-0001", "tenant": "acme"}]'
    )
    (tmp_path / "bad.json").write_text('[{"name": "a", "token": "short", "tenant": "acme"}]')
    result = runner.invoke(app, args)
    assert result.exit_code == code, result.output
    assert said in result.output
    assert "Traceback" not in result.output
