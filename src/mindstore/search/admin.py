"""`acme.search_index`: the operators' side of search (rebuild, verify, stemming).

`rebuild` drops the tenant's index and indexes every task again (also how stemming is
switched on or off); `verify` reads every task of the tenant and compares what the index
should hold with what it holds, writing nothing. docs/search.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mindstore.collection_names import TASKS
from mindstore.ids import task_id_of

from .entries import chunk_indexes, entry_id, key_of
from .index import SearchStore, codec_for, entry_for, stats_id, unpack
from .tokenize import stemmer_for

__all__ = ["SearchIndexAdmin", "VerifyReport"]


@dataclass
class VerifyReport:
    """What `verify` found: `ok` when the index holds exactly what the tasks say."""

    tasks: int = 0
    entries: int = 0
    missing: list[str] = field(default_factory=list)
    """Entry ids the index lacks (a message not indexed yet is listed here until the next
    search brings the index up to date)."""
    extra: list[str] = field(default_factory=list)
    """Entry ids the index holds for no current message (a deleted or redacted one)."""
    statistics_ok: bool = True
    """The tenant's message and term counts match the entries."""
    postings_ok: bool = True
    """Every expected posting is stored, once, and no other."""

    @property
    def ok(self) -> bool:
        return not self.missing and not self.extra and self.statistics_ok and self.postings_ok


class SearchIndexAdmin:
    """Rebuild and verify one tenant's index."""

    def __init__(self, index: SearchStore) -> None:
        self.index = index

    async def rebuild(self, *, stemming: str | None = None) -> int:
        """Drop the tenant's index and index every task again; return the entries made.

        Args:
            stemming: ``"english"`` to stem English words from now on (Snowball); None: no
                stemming.

        Raises:
            ConfigurationError: An unknown language, or `snowballstemmer` missing.
            KeyShredded: The tenant's keys were destroyed.
        """
        stemmer_for(stemming)  # refuse before dropping anything
        await self.index.reset(stemming=stemming)
        await self.index.refresh()  # the codec and postings are not needed here
        state = await self.index.state(fresh=True)
        return state.documents

    async def verify(self) -> VerifyReport:
        """Compare the index with the tenant's tasks, writing nothing (see `VerifyReport`)."""
        index = self.index
        state = await index.state(fresh=True)
        codec = await codec_for(index.tenant, index.cipher, state)
        report = VerifyReport()
        expected: set[str] = set()
        postings: set[tuple[str, str, int]] = set()
        tasks = index.database[TASKS].find({"tenant": index.tenant}, {"owner": 1})
        async for task in tasks:
            report.tasks += 1
            task_id = task_id_of(str(task["_id"]))
            for n, message in enumerate(await index.tasks.read_range(task_id)):
                entry = entry_for(message, n, index.tenant, task_id, codec)
                if entry is not None:
                    expected.add(entry.id)
                    postings |= {(term, task_id, n) for term in entry.postings}
        held: list[str] = []
        length = 0
        tasks_by_ordinal: dict[int, set[str]] = {}
        chunks = index.entries.find({"tenant": index.tenant}, {"g": 1, "n": 1, "r": 1, "task": 1})
        async for chunk in chunks:
            key = key_of(str(chunk["_id"]))
            held += [entry_id(key, i) for i in chunk_indexes(chunk)]
            length += int(chunk.get("n") or 0)
            tasks_by_ordinal.setdefault(int(chunk.get("r") or 0), set()).add(str(chunk["task"]))
        report.entries = len(held)
        report.missing = sorted(set(expected) - set(held))
        report.extra = sorted(set(held) - expected)
        stored: list[tuple[str, str, int]] = []
        stats: dict[str, object] = {}
        prefix = len(index.tenant) + 1
        async for document in index.postings.find({"tenant": index.tenant}):
            if document["_id"] == stats_id(index.tenant):
                stats = document
                continue
            term = document["_id"][prefix : document["_id"].rindex("/")]
            for group in document.get("e") or []:
                for occurrence in unpack(group):
                    # an ordinal no chunk names, or two tasks' chunks name, matches nothing
                    named = tasks_by_ordinal.get(occurrence.ordinal, set())
                    task = next(iter(named)) if len(named) == 1 else "?"
                    stored.append((term, task, occurrence.index))
        report.postings_ok = len(stored) == len(set(stored)) and set(stored) == postings
        if held:
            report.statistics_ok = (
                int(str(stats.get("docs") or 0)) == len(held)
                and int(str(stats.get("length") or 0)) == length
            )
        return report
