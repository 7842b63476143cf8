"""mindstore benchmarks: `python -m benchmarks` (or `scripts/bench`) runs every bench_*.py."""
