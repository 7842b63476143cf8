"""What turns text into vectors for recall by meaning (docs/search.md, "Recall by meaning").

`Embedder` is the protocol a store is given (`mindstore.connect(uri, embedder=...)`):
async, batched (`batch_size` texts at most per call), named (`model`) and sized
(`dimensions`): the pair is recorded in each tenant's index, and vectors of another model
are never ranked with the current one's. `embed_all` cuts any number of texts into the
embedder's batches and checks what comes back (a vector per text, of the stated size,
finite), normalised to unit length so a dot product is the cosine. `HashingEmbedder` is
the deterministic one (hashed words and character trigrams: no model, the same vector in
every process) for tests and the demo. The providers (OpenAI, Gemini, a local
sentence-transformers model) are in `providers`. Pure but for the embedders' own calls.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence
from typing import Literal, Protocol, runtime_checkable

from mindstore.errors import ConfigurationError, ValidationError

__all__ = [
    "MAX_BATCH",
    "MAX_DIMENSIONS",
    "Embedder",
    "HashingEmbedder",
    "Purpose",
    "check_embedder",
    "embed_all",
    "model_key",
]

Purpose = Literal["query", "document"]
"""What a text is embedded for: some models embed a question and a passage differently."""

MAX_BATCH = 2048
"""The most texts one `embed` call may be given (OpenAI's own limit per request)."""
MAX_DIMENSIONS = 8192


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors: `embed(texts, purpose=...)` returns one vector of
    `dimensions` floats per text, in order, for at most `batch_size` texts a call."""

    @property
    def model(self) -> str:
        """The model's name, recorded per tenant with `dimensions`."""
        ...

    @property
    def dimensions(self) -> int: ...

    @property
    def batch_size(self) -> int: ...

    async def embed(
        self, texts: Sequence[str], *, purpose: Purpose
    ) -> Sequence[Sequence[float]]: ...


def check_embedder(embedder: object) -> Embedder:
    """`embedder`, checked as a store takes it (ConfigurationError naming what is wrong)."""
    if not isinstance(embedder, Embedder):
        raise ConfigurationError("embedder: needs model, dimensions, batch_size and embed()")
    model, dimensions, batch = embedder.model, embedder.dimensions, embedder.batch_size
    if not isinstance(model, str) or not 0 < len(model) <= 200 or not model.isprintable():
        raise ConfigurationError("embedder.model: a printable name of 1 to 200 characters")
    limits = ((dimensions, "dimensions", MAX_DIMENSIONS), (batch, "batch_size", MAX_BATCH))
    for value, what, most in limits:
        if type(value) is not int or not 0 < value <= most:
            raise ConfigurationError(f"embedder.{what}: an int from 1 to {most}")
    return embedder


def model_key(embedder: Embedder) -> str:
    """How a tenant's index records the model: name and dimensions (`name@dims`)."""
    return f"{embedder.model}@{embedder.dimensions}"


def _unit(vector: Sequence[float], dimensions: int, model: str) -> list[float]:
    if len(vector) != dimensions:
        raise ConfigurationError(
            f"embedder {model}: returned {len(vector)} dimensions, not {dimensions}"
        )
    values = [float(x) for x in vector]
    if not all(math.isfinite(x) for x in values):
        raise ConfigurationError(f"embedder {model}: returned a value that is not finite")
    norm = math.sqrt(sum(x * x for x in values))
    return [x / norm for x in values] if norm > 0 else values


async def embed_all(
    embedder: Embedder, texts: Sequence[str], *, purpose: Purpose
) -> list[list[float]]:
    """Every text's vector, unit length, in order: `batch_size` texts per call."""
    if purpose not in ("query", "document"):
        raise ValidationError(f"purpose: 'query' or 'document', not {purpose!r}")
    out: list[list[float]] = []
    size = embedder.batch_size
    for start in range(0, len(texts), size):
        batch = list(texts[start : start + size])
        vectors = list(await embedder.embed(batch, purpose=purpose))
        if len(vectors) != len(batch):
            raise ConfigurationError(
                f"embedder {embedder.model}: {len(vectors)} vectors for {len(batch)} texts"
            )
        out += [_unit(v, embedder.dimensions, embedder.model) for v in vectors]
    return out


_WORD = re.compile(r"\w+")


class HashingEmbedder:
    """A deterministic embedder: each lowercased word and each character trigram of a word
    hashed (BLAKE2b) into one of `dimensions` buckets with a sign. Texts sharing words
    or word parts score close; there is no meaning in it ("wedding" is not "married"), but
    every process computes the same vector, which is what tests and the demo need."""

    def __init__(self, dimensions: int = 256, *, batch_size: int = 256) -> None:
        self.model = f"mindstore-hashing-v1-{dimensions}"
        self.dimensions = dimensions
        self.batch_size = batch_size
        self.calls: list[tuple[int, Purpose]] = []
        """The last thousand `embed` calls' (batch length, purpose): what tests count."""

    def _features(self, text: str) -> list[str]:
        words = _WORD.findall(text.lower())
        grams = [w[i : i + 3] for w in (f"<{w}>" for w in words) for i in range(len(w) - 2)]
        return [*(f"w:{w}" for w in words), *(f"g:{g}" for g in grams)]

    def vector(self, text: str) -> list[float]:
        """The vector of one text (unit length; all zeros for a text without a word)."""
        values = [0.0] * self.dimensions
        for feature in self._features(text):
            digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
            bucket = int.from_bytes(digest[:4], "big") % self.dimensions
            weight = 2.0 if feature.startswith("w:") else 1.0
            values[bucket] += weight if digest[4] & 1 else -weight
        norm = math.sqrt(sum(x * x for x in values))
        return [x / norm for x in values] if norm > 0 else values

    async def embed(self, texts: Sequence[str], *, purpose: Purpose) -> list[list[float]]:
        if len(texts) > self.batch_size:
            raise ValidationError(f"texts: at most {self.batch_size} a call")
        self.calls.append((len(texts), purpose))
        del self.calls[:-1000]  # the last thousand: a long-running demo does not grow
        return [self.vector(text) for text in texts]
