"""The retrieval-quality benchmark's parts (benchmarks/bench_recall.py runs them): the
LoCoMo data, the metrics, the independent oracles, mindstore's side, typed questions."""
