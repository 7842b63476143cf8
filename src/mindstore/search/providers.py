"""Embedders of real models (`embedder.Embedder`): OpenAI's and Google's embedding APIs
through their own SDKs (the `recall-openai` and `recall-gemini` extras), and a local
sentence-transformers model (`recall-local`), loaded from a folder or given loaded:
nothing here downloads weights. Each SDK is imported when its embedder is made, so the
core never needs one. docs/search.md ("Recall by meaning").
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mindstore.errors import ConfigurationError, ValidationError

from .embedder import MAX_BATCH, Purpose

if TYPE_CHECKING:
    from google.genai import Client as GeminiClient
    from openai import AsyncOpenAI
    from sentence_transformers import SentenceTransformer

__all__ = ["GeminiEmbedder", "OpenAIEmbedder", "SentenceTransformerEmbedder"]


def _missing(extra: str, package: str) -> ConfigurationError:
    """The error of an embedder whose SDK is not installed: which extra brings it."""
    return ConfigurationError(f"this embedder needs {package}: pip install 'mindstore[{extra}]'")


def _bounded(texts: Sequence[str], batch_size: int) -> list[str]:
    if len(texts) > batch_size:
        raise ValidationError(f"texts: at most {batch_size} a call")
    return list(texts)


class OpenAIEmbedder:
    """OpenAI's embeddings (`text-embedding-3-small` by default, 1536 dimensions; with
    `dimensions` given, the API shortens its vectors to that size). `client`: an
    `openai.AsyncOpenAI` (default: one from the environment's `OPENAI_API_KEY`)."""

    def __init__(
        self,
        client: AsyncOpenAI | None = None,
        *,
        model: str = "text-embedding-3-small",
        dimensions: int | None = None,
        batch_size: int = 512,
    ) -> None:
        if client is None:
            try:
                from openai import AsyncOpenAI, OpenAIError
            except ImportError:
                raise _missing("recall-openai", "the openai package") from None
            try:
                client = AsyncOpenAI()
            except OpenAIError as error:  # no OPENAI_API_KEY in the environment
                raise ConfigurationError(f"OpenAIEmbedder: {error}") from None
        if not 0 < batch_size <= MAX_BATCH:
            raise ConfigurationError(f"batch_size: from 1 to {MAX_BATCH}")
        self.client = client
        self.model = model
        self._shorten = dimensions
        self.dimensions = dimensions or (3072 if model.endswith("-large") else 1536)
        self.batch_size = batch_size

    async def embed(self, texts: Sequence[str], *, purpose: Purpose) -> list[list[float]]:
        batch = _bounded(texts, self.batch_size)
        extra: dict[str, Any] = {}
        if self._shorten is not None:
            extra["dimensions"] = self._shorten
        response = await self.client.embeddings.create(
            model=self.model, input=batch, encoding_format="float", **extra
        )
        ordered = sorted(response.data, key=lambda item: item.index)
        return [list(item.embedding) for item in ordered]


class GeminiEmbedder:
    """Google's Gemini embeddings (`gemini-embedding-001`, 768 dimensions by default; a
    query and a document are embedded for retrieval, each as its own task type).
    `client`: a `google.genai.Client` (default: one from the environment)."""

    def __init__(
        self,
        client: GeminiClient | None = None,
        *,
        model: str = "gemini-embedding-001",
        dimensions: int = 768,
        batch_size: int = 100,
    ) -> None:
        if client is None:
            try:
                from google.genai import Client
            except ImportError:
                raise _missing("recall-gemini", "the google-genai package") from None
            try:
                client = Client()
            except ValueError as error:  # no API key (nor Vertex settings) in the environment
                raise ConfigurationError(f"GeminiEmbedder: {error}") from None
        if not 0 < batch_size <= 250:
            raise ConfigurationError("batch_size: from 1 to 250 (the API's limit a request)")
        self.client = client
        self.model = model
        self.dimensions = dimensions
        self.batch_size = batch_size

    async def embed(self, texts: Sequence[str], *, purpose: Purpose) -> list[list[float]]:
        from google.genai import types

        batch = _bounded(texts, self.batch_size)
        config = types.EmbedContentConfig(
            task_type="RETRIEVAL_QUERY" if purpose == "query" else "RETRIEVAL_DOCUMENT",
            output_dimensionality=self.dimensions,
        )
        response = await self.client.aio.models.embed_content(
            model=self.model,
            contents=batch,  # type: ignore[arg-type]
            config=config,
        )
        return [list(item.values or []) for item in response.embeddings or []]


class SentenceTransformerEmbedder:
    """A local sentence-transformers model: `model_or_path` a loaded `SentenceTransformer`
    or the folder of one (loaded with the Hugging Face hub offline: never a download).
    The encoding runs in a worker thread, not on the event loop."""

    def __init__(
        self,
        model_or_path: SentenceTransformer | str | os.PathLike[str],
        *,
        name: str | None = None,
        batch_size: int = 64,
    ) -> None:
        if isinstance(model_or_path, str | os.PathLike):
            folder = Path(model_or_path)
            if not folder.is_dir():
                raise ConfigurationError(f"model_or_path: {folder} is not a model's folder")
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError:
                raise _missing("recall-local", "sentence-transformers") from None

            loaded = SentenceTransformer(str(folder), device="cpu", local_files_only=True)
            default_name = folder.name
        else:
            loaded = model_or_path
            default_name = type(model_or_path).__name__
        size = getattr(loaded, "get_embedding_dimension", None)
        dimensions = size() if size is not None else loaded.get_sentence_embedding_dimension()
        if not isinstance(dimensions, int):
            raise ConfigurationError("model_or_path: the model does not say its dimensions")
        self.encoder = loaded
        self.model = name or default_name
        self.dimensions = dimensions
        self.batch_size = batch_size

    async def embed(self, texts: Sequence[str], *, purpose: Purpose) -> list[list[float]]:
        batch = _bounded(texts, self.batch_size)
        encoded = await asyncio.to_thread(
            self.encoder.encode,
            batch,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return [[float(x) for x in row] for row in encoded]
