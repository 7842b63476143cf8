"""`mindstore --embedder SPEC`: the CLI's recall by meaning (hashing, a local model's
folder, a provider), and a bad spec refused naming the option."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import mindstore
from mindstore.backends.snapshot import save_snapshot
from mindstore.cli import app
from mindstore.commands.common import build_embedder
from mindstore.errors import ValidationError
from mindstore.search import HashingEmbedder

runner = CliRunner()


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "store.gz"

    async def body() -> None:
        store = await mindstore.connect("embedded")
        acme = store.scoped("acme")
        await acme.tasks.create(task_id="t")
        for text in ("my blender jar arrived cracked", "book a hotel in lisbon"):
            await acme.tasks.add_human_message("t", text)
        await save_snapshot(store.database, path)
        await store.close()

    asyncio.run(body())
    return path


def test_a_semantic_search_needs_an_embedder_and_finds_with_one(data: Path) -> None:
    args = ["search", "--tenant", "acme", "blenders", "--mode", "semantic", "-f", "json"]
    refused = runner.invoke(app, ["--data", str(data), *args])
    assert refused.exit_code == 7 and "embedder" in refused.output
    found = runner.invoke(app, ["--data", str(data), "--embedder", "hashing:64", *args])
    assert found.exit_code == 0, found.output
    hits = json.loads(found.stdout)["hits"]
    assert hits[0]["snippet"] == "my blender jar arrived cracked"  # shares the word's trigrams


@pytest.mark.parametrize(
    "spec", ["nope", "hashing:0", "hashing:abc", "hashing:99999", "local:", "local"]
)
def test_a_bad_spec_names_the_option(spec: str, data: Path) -> None:
    with pytest.raises(ValidationError, match="--embedder"):
        build_embedder(spec)
    result = runner.invoke(app, ["--data", str(data), "--embedder", spec, "search", "--tenant",
                                 "acme", "x"])  # fmt: skip
    assert result.exit_code == 2 and "--embedder" in result.output


def test_specs_build_their_embedders(tmp_path: Path) -> None:
    built = build_embedder("hashing:32")
    assert isinstance(built, HashingEmbedder) and built.dimensions == 32
    assert build_embedder(None) is None and build_embedder("") is None
    with pytest.raises(mindstore.errors.ConfigurationError, match="model_or_path"):
        build_embedder(f"local:{tmp_path / 'missing'}")


@pytest.mark.parametrize(
    ("spec", "module", "extra"),
    [
        ("local:{folder}", "sentence_transformers", "recall-local"),
        ("openai", "openai", "recall-openai"),
        ("gemini:gemini-embedding-001", "google.genai", "recall-gemini"),
    ],
)
def test_an_embedder_without_its_sdk_is_a_configuration_error_naming_the_extra(
    spec: str, module: str, extra: str, data: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setitem(__import__("sys").modules, module, None)  # as if not installed
    spec = spec.format(folder=tmp_path)
    with pytest.raises(mindstore.errors.ConfigurationError, match=extra):
        build_embedder(spec)
    result = runner.invoke(app, ["--data", str(data), "--embedder", spec, "search", "--tenant",
                                 "acme", "blender"])  # fmt: skip
    assert result.exit_code == 7 and extra in result.output, result.output


@pytest.mark.parametrize(
    ("spec", "name"), [("openai", "OpenAIEmbedder"), ("gemini", "GeminiEmbedder")]
)
def test_a_provider_without_its_key_is_a_configuration_error(
    spec: str, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY", "GOOGLE_API_KEY", "GEMINI_API_KEY",
                 "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_CLOUD_PROJECT"):  # fmt: skip
        monkeypatch.delenv(variable, raising=False)
    with pytest.raises(mindstore.errors.ConfigurationError, match=name):
        build_embedder(spec)
