"""The index audit: each query of each recorded command, planned against the declared
indexes, and passed when an index serves it or a bounded scan allows it.

Pure: the caller brings the commands (the suite records them, tests/conftest.py) and the
declared indexes (`declared_indexes` over the document models); verdicts are cached by
shape, since a suite sends the same few hundred shapes many thousand times.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from mindstore.backends.recorder import RecordedCommand

from .allowed import BoundedScan, allowed_by
from .plan import IndexSpec, Verdict, serving_index
from .shapes import QueryShape, shapes_of

__all__ = ["IndexAudit", "IndexFinding"]


@dataclass(frozen=True)
class IndexFinding:
    """One query shape: how it is answered, and the bounded scan that allows it if no
    index serves it."""

    shape: QueryShape
    verdict: Verdict
    allowed: BoundedScan | None = None

    @property
    def ok(self) -> bool:
        return self.verdict.ok or self.allowed is not None

    def problem(self) -> str:
        """Why the audit fails it: the outcome, the closest index and its problems."""
        near = f" (closest index {self.verdict.index.describe()})" if self.verdict.index else ""
        return f"{self.verdict.outcome}{near}: " + "; ".join(self.verdict.problems)


class IndexAudit:
    """Plans query shapes against `indexes` (collection -> its declared indexes); a
    collection that declares none has the `_id` index only."""

    def __init__(self, indexes: Mapping[str, Sequence[IndexSpec]]) -> None:
        self.indexes = {name: tuple(specs) for name, specs in indexes.items()}
        self._seen: dict[QueryShape, IndexFinding] = {}

    def check(self, shape: QueryShape) -> IndexFinding:
        """The finding for one shape (cached)."""
        found = self._seen.get(shape)
        if found is None:
            verdict = serving_index(shape, self.indexes.get(shape.collection, ()))
            found = IndexFinding(shape, verdict, None if verdict.ok else allowed_by(shape))
            self._seen[shape] = found
        return found

    def findings(
        self, commands: Iterable[RecordedCommand]
    ) -> list[tuple[RecordedCommand, IndexFinding]]:
        """Every query of `commands` with its finding, in order."""
        return [(c, self.check(shape)) for c in commands for shape in shapes_of(c)]
