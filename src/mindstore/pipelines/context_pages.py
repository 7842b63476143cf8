"""Window pipelines for one *segment* of a paged task: a sealed page or the open page.

`pipelines.context` builds the model window of a level in one pipeline over one
document, finding the latest checkpoint in the same array. A paged task's level spans
several documents, so its reader first fetches the level's latest checkpoint, then runs
these pipelines per segment with that checkpoint's lists given as literals: the same
view (the level without compression messages, minus what the checkpoint dropped, its
stubbed tool results cut to a skeleton) and the same visibility, so the counts and slices
of all segments add up to what the one-document pipeline computes (pure builders).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mindstore.pipelines.boundaries import Pipeline, _in_level_expr, literal
from mindstore.pipelines.context import MAX_SLICE, _stub_skeleton, model_visible_expr


def _segment_view(
    scope: str | None, dropped: Sequence[str], stubbed: Sequence[str], anchor: str | None
) -> Pipeline:
    """Stages leaving `view` and `visible` of one segment (after its `$match`)."""
    in_level = _in_level_expr(scope)
    not_mark = {"$and": [in_level, {"$ne": ["$$m.role", "compression"]}]}
    kept = {
        "$filter": {
            "input": "$level",
            "as": "m",
            "cond": {"$eq": [{"$in": ["$$m.id", literal(list(dropped))]}, False]},
        }
    }
    stub = {"$cond": [{"$in": ["$$m.id", literal(list(stubbed))]}, _stub_skeleton(), "$$m"]}
    visible = {"$or": [model_visible_expr(), {"$eq": ["$$m.id", literal(anchor)]}]}
    return [
        {"$project": {"level": {"$filter": {"input": "$messages", "as": "m", "cond": not_mark}}}},
        {"$project": {"level_count": {"$size": "$level"},
                      "view": {"$map": {"input": kept, "as": "m", "in": stub}}}},
        {"$project": {"level_count": 1, "view": 1,
                      "visible": {"$filter": {"input": "$view", "as": "m", "cond": visible}}}},
    ]  # fmt: skip


def segment_counts(
    scope: str | None, dropped: Sequence[str], stubbed: Sequence[str], anchor: str | None
) -> Pipeline:
    """Per segment: its level, view, visible and model-visible counts and its system
    messages (few; the window keeps the level's system messages after its head)."""
    return [
        *_segment_view(scope, dropped, stubbed, anchor),
        {
            "$project": {
                "level_count": 1,
                "view_count": {"$size": "$view"},
                "visible_count": {"$size": "$visible"},
                "model_count": {
                    "$size": {
                        "$filter": {"input": "$visible", "as": "m", "cond": model_visible_expr()}
                    }
                },
                "systems": {
                    "$filter": {
                        "input": "$view",
                        "as": "m",
                        "cond": {"$eq": ["$$m.role", "system"]},
                    }
                },
            }
        },
    ]


def segment_slice(
    scope: str | None,
    dropped: Sequence[str],
    stubbed: Sequence[str],
    anchor: str | None,
    *,
    field: str,
    start: int,
    count: int,
) -> Pipeline:
    """Per segment: `count` messages of its `view` or `visible` list from `start`."""
    if field not in ("view", "visible"):
        raise ValueError(f"field: expected 'view' or 'visible', got {field!r}")
    start = max(0, min(start, MAX_SLICE))
    count = max(1, min(count, MAX_SLICE))
    return [
        *_segment_view(scope, dropped, stubbed, anchor),
        {"$project": {"slice": {"$slice": [f"${field}", start, count]}}},
    ]


Cuts = Sequence[tuple[int, int, int]]
"""(page number, start, count) of one field's list; a page wanted whole has start 0 and a
count of at least its length."""


def _cut_expr(field: str, cuts: Cuts, whole: Sequence[int]) -> Any:
    """One page's share of `field`: all of it on a page wanted whole (one `$in` whatever
    their number), a `$slice` on a page wanted in part (the first or last of a run: a few),
    else nothing. Constant depth in the pages wanted whole, so a window over many small
    pages stays one flat expression."""
    expr: Any = literal([])
    for page, start, count in cuts:
        if page in whole:
            continue
        start = max(0, min(start, MAX_SLICE))
        count = max(1, min(count, MAX_SLICE))
        piece = {"$slice": [f"${field}", start, count]}
        expr = {"$cond": [{"$eq": ["$page", page]}, piece, expr]}
    if whole:
        expr = {"$cond": [{"$in": ["$page", literal(list(whole))]}, f"${field}", expr]}
    return expr


def segment_cuts(
    scope: str | None,
    dropped: Sequence[str],
    stubbed: Sequence[str],
    anchor: str | None,
    cuts: Mapping[str, Cuts],
    counts: Mapping[int, Mapping[str, int]],
) -> Pipeline:
    """Per page: its share of each list named in `cuts` (`view` or `visible`), in one
    pipeline, so a window's head and tail slices over any number of pages cost one read.
    `counts`: each page's `view_count` / `visible_count`, to tell a page wanted whole."""
    project: dict[str, Any] = {}
    for field, wanted in cuts.items():
        if field not in ("view", "visible"):
            raise ValueError(f"field: expected 'view' or 'visible', got {field!r}")
        counted = f"{field}_count"
        whole = [page for page, start, count in wanted
                 if start == 0 and count >= int(counts.get(page, {}).get(counted, 0))]  # fmt: skip
        project[field] = _cut_expr(field, wanted, whole)
    return [*_segment_view(scope, dropped, stubbed, anchor), {"$project": project}]
