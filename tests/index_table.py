"""docs/operations.md's table of query shapes, as the index audit sees them.

The suite's index audit (tests/conftest.py) fails a test that sends a query shape this
table does not list, and tests/test_index_audit.py checks that each row's index is the one
the audit plans for its shape, so the table stays the whole truth. To rewrite it after a
change of queries or indexes, record the shapes of both suite passes and render them:

    MINDSTORE_INDEX_SHAPES=/tmp/shapes.jsonl scripts/test        # both page sizes
    .venv/bin/python tests/index_table.py /tmp/shapes.jsonl       # rewrites the table

or, after a subset run, ``--add`` keeps the rows there are and adds the new shapes.

A row is one shape (collection, fields and how each is compared, sort); a point query
(``_id`` by value or list) is one row per collection whatever else it names, since the
``_id`` index serves it alone. A shape that only a bounded scan allows is documented by
its family (the second table: which fields it may name, why, how much it reads); the
rows of such shapes the suite sent are listed too, but a test that sends a new one (a
hypothesis example combining an analytics report's filters anew) needs no new row.
Rendering and parsing only: no database.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from mindstore.document_models import document_models
from mindstore.index_audit.allowed import BOUNDED_SCANS
from mindstore.index_audit.audit import IndexAudit, IndexFinding
from mindstore.index_audit.declared import declared_indexes
from mindstore.index_audit.shapes import QueryShape
from mindstore.integrations import langgraph_documents  # noqa: F401  (declares its indexes)

OPERATIONS = Path(__file__).resolve().parents[1] / "docs" / "operations.md"
BEGIN, END = "<!-- query shapes: begin -->", "<!-- query shapes: end -->"
SCANS_BEGIN, SCANS_END = "<!-- bounded scans: begin -->", "<!-- bounded scans: end -->"
POINT = "_id = (a value or a list), with any other fields"
HEADER = "| collection | query | commands | served by |\n|---|---|---|---|"
SCANS_HEADER = "| bounded scan | collection | query | why | bound |\n|---|---|---|---|---|"


def audit() -> IndexAudit:
    """An audit over the indexes mindstore declares (core and LangGraph models)."""
    return IndexAudit(declared_indexes(document_models()))


def row_key(shape: QueryShape) -> tuple[str, str]:
    """(collection, query text) of the shape's row."""
    return shape.collection, POINT if shape.point else shape.describe()


def served(finding: IndexFinding) -> str:
    """The last column: the index, or the bounded scan that allows the shape."""
    verdict = finding.verdict
    if verdict.ok and verdict.index is not None:
        return verdict.index.describe()
    if finding.allowed is not None:
        near = f", through {verdict.index.describe()}" if verdict.index else ""
        return f"bounded scan: *{finding.allowed.name}*{near}"
    return f"**none**: {finding.problem()}"


def _between(text: str, begin: str, end: str) -> str:
    if begin not in text or end not in text:
        raise ValueError(f"{OPERATIONS.name} lacks the markers {begin} ... {end}")
    return text.split(begin, 1)[1].split(end, 1)[0]


def documented(text: str | None = None) -> dict[tuple[str, str], tuple[str, str]]:
    """(collection, query) -> (commands, served by) of every row of the table."""
    table = _between(OPERATIONS.read_text() if text is None else text, BEGIN, END)
    rows: dict[tuple[str, str], tuple[str, str]] = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or cells[0] in ("collection", "---"):
            continue
        rows[(cells[0].strip("`"), cells[1].strip("`"))] = (cells[2], cells[3])
    return rows


def documented_scans(text: str | None = None) -> dict[str, tuple[str, str, str, str]]:
    """bounded scan name -> (collection, query, why, bound) of the second table."""
    table = _between(OPERATIONS.read_text() if text is None else text, SCANS_BEGIN, SCANS_END)
    rows: dict[str, tuple[str, str, str, str]] = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5 or cells[0] in ("bounded scan", "---"):
            continue
        rows[cells[0].strip("*")] = (cells[1].strip("`"), cells[2], cells[3], cells[4])
    return rows


_CONDITION = re.compile(r"^(?P<field>.+) (?P<kind>=|range|filter)$")


def parse_row(collection: str, query: str) -> QueryShape:
    """The shape a row's query text describes (the inverse of `QueryShape.describe`)."""
    if query == POINT:
        return QueryShape(collection, "", frozenset({"_id"}), point=True)
    distinct = None
    if query.startswith("distinct "):
        distinct, query = query[len("distinct ") :].split(" of ", 1)
    conditions, _, sort_text = query.partition("; sort ")
    found: dict[str, set[str]] = defaultdict(set)
    if conditions != "(no filter)":
        for condition in conditions.split(", "):
            match = _CONDITION.match(condition)
            if match is None:
                raise ValueError(f"cannot read condition {condition!r} of {query!r}")
            found[match["kind"]].add(match["field"])
    sort = tuple(
        (item.removesuffix(" desc"), -1 if item.endswith(" desc") else 1)
        for item in sort_text.split(", ")
        if sort_text
    )
    return QueryShape(
        collection,
        "",
        frozenset(found["="]),
        frozenset(found["range"]),
        frozenset(found["filter"]),
        sort,
        False,
        distinct,
    )


def shape_record(shape: QueryShape) -> dict[str, Any]:
    """A shape as one JSON line of a `MINDSTORE_INDEX_SHAPES` file."""
    return {
        "collection": shape.collection,
        "command": shape.command,
        "equality": sorted(shape.equality),
        "ranges": sorted(shape.ranges),
        "residual": sorted(shape.residual),
        "sort": [list(s) for s in shape.sort],
        "point": shape.point,
        "distinct": shape.distinct,
    }


def from_record(record: Mapping[str, Any]) -> QueryShape:
    return QueryShape(
        record["collection"],
        record["command"],
        frozenset(record["equality"]),
        frozenset(record["ranges"]),
        frozenset(record["residual"]),
        tuple((f, int(d)) for f, d in record["sort"]),
        bool(record["point"]),
        record.get("distinct"),
    )


def render(shapes: Iterable[QueryShape]) -> str:
    """The rows of the table for `shapes` (the commands of a row merged), sorted."""
    checker = audit()
    commands: dict[tuple[str, str], set[str]] = defaultdict(set)
    findings: dict[tuple[str, str], IndexFinding] = {}
    for shape in shapes:
        key = row_key(shape)
        commands[key].add(shape.command)
        findings.setdefault(key, checker.check(shape))
    lines = [HEADER]
    for key in sorted(findings, key=lambda k: (k[0], k[1] != POINT, k[1])):
        collection, query = key
        shown = ", ".join(sorted(commands[key]))
        lines.append(f"| `{collection}` | `{query}` | {shown} | {served(findings[key])} |")
    return "\n".join(lines)


def render_scans() -> str:
    lines = [SCANS_HEADER]
    for entry in BOUNDED_SCANS:
        where = f"`{entry.collection}`" if entry.collection else "every collection"
        lines.append(
            f"| *{entry.name}* | {where} | {entry.describe()} | {entry.reason} | {entry.bound} |"
        )
    return "\n".join(lines)


def rewrite(text: str, shapes: Iterable[QueryShape]) -> str:
    """`text` (operations.md) with both tables rendered anew."""
    before, rest = text.split(BEGIN, 1)
    _, after = rest.split(END, 1)
    text = f"{before}{BEGIN}\n{render(shapes)}\n{END}{after}"
    before, rest = text.split(SCANS_BEGIN, 1)
    _, after = rest.split(SCANS_END, 1)
    return f"{before}{SCANS_BEGIN}\n{render_scans()}\n{SCANS_END}{after}"


def documented_shapes(text: str | None = None) -> list[QueryShape]:
    """The shapes of the table's rows, once per command listed."""
    return [
        dataclasses.replace(parse_row(collection, query), command=command)
        for (collection, query), (commands, _) in documented(text).items()
        for command in commands.split(", ")
    ]


def main(arguments: list[str]) -> int:
    add = "--add" in arguments
    paths = [a for a in arguments if a != "--add"]
    shapes = [
        from_record(json.loads(line))
        for path in paths
        for line in Path(path).read_text().splitlines()
        if line.strip()
    ]
    if not shapes:
        print("no shapes recorded: run the suite with MINDSTORE_INDEX_SHAPES=<file>")
        return 1
    text = OPERATIONS.read_text()
    if add:
        shapes += documented_shapes(text)
    OPERATIONS.write_text(rewrite(text, shapes))
    print(f"{OPERATIONS}: {len({row_key(s) for s in shapes})} query shapes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
