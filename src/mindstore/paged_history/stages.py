"""Aggregation stages that read a paged task's whole history on the server (pure builders).

A report over tasks (docs/analytics.md) runs its stages over task documents, each holding
its `messages`. `history_stages` sits right after the report's task `$match` and turns
every task document into one document per *segment* of its history, each with the task's
`_id`, its `owner` and the segment's `messages`:

* ``open``: the task document's own messages (the open page); an unpaged task is this
  segment alone, unchanged;
* ``sealed``: one document per visible page (``page < pages``), found by `$lookup` on the
  pages' `_id`s (``page_key(task, n)``, built on the server from the task's `pages` mark,
  so a half-done seal's page is never named and the lookup uses the `_id` index); a page
  must name the task and be stored under the report's tenant, else it is dropped;
* ``patch``: the sealed messages the task's `pending` entries change, as the reader
  patched them (`PagedHistory.patches`), given as a literal; the page segments leave
  those messages out, so each message is counted once, in its committed state.

Every stage after this reads only `_id`, `owner` and `messages`, and the report's stages
group by task with accumulators that do not depend on message order, so a report
returns the same rows whether a history is paged or not. The `$lookup` is followed by an
`$unwind` of its result, which MongoDB folds into the lookup: no document ever holds all
of a long history's pages at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mindstore.ids import PAGE_KEY_SEPARATOR

__all__ = ["PAGES_COLLECTION", "Patch", "history_stages", "paged_or"]

PAGES_COLLECTION = "task_pages"
"""The sealed pages' collection (`documents.TASK_PAGES`)."""

Stage = dict[str, Any]
_OPEN, _SEALED, _PATCH = "open", "sealed", "patch"


@dataclass(frozen=True)
class Patch:
    """The sealed messages of one task that pending entries change, as committed."""

    task: str  # the task's stored key
    messages: tuple[dict[str, Any], ...]

    def literal(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "ids": [m.get("id") for m in self.messages],
            "messages": list(self.messages),
        }


def _is(segment: str) -> dict[str, Any]:
    return {"$eq": ["$seg", segment]}


def _page_ids() -> dict[str, Any]:
    """The `_id`s of the task's visible pages, ``key#0 .. key#(pages-1)``."""
    return {
        "$map": {
            "input": {"$range": [0, {"$ifNull": ["$pages", 0]}]},
            "as": "n",
            "in": {"$concat": ["$_id", PAGE_KEY_SEPARATOR, {"$toString": "$$n"}]},
        }
    }


def history_stages(tenant: str, patches: Sequence[Patch] = ()) -> list[Stage]:
    """The stages that follow a report's task `$match` (see the module docstring)."""
    stages: list[Stage] = []
    segments: list[str] = [_OPEN, _SEALED]
    paged_segments: Any = {"$literal": segments}
    if patches:
        found = {
            "$filter": {
                "input": {"$literal": [p.literal() for p in patches]},
                "as": "p",
                "cond": {"$eq": ["$$p.task", "$_id"]},
            }
        }
        stages += [
            {"$project": {"owner": 1, "messages": 1, "pages": 1, "patch": found}},
            {"$unwind": {"path": "$patch", "preserveNullAndEmptyArrays": True}},
        ]
        paged_segments = {
            "$cond": [
                {"$gt": ["$patch", None]},
                {"$literal": [*segments, _PATCH]},
                {"$literal": segments},
            ]
        }
    paged = {"$gt": [{"$ifNull": ["$pages", 0]}, 0]}
    stages += [
        {
            "$project": {
                "owner": 1,
                "messages": 1,
                "pages": 1,
                "patch": 1,
                "seg": {"$cond": [paged, paged_segments, {"$literal": [_OPEN]}]},
            }
        },
        {"$unwind": "$seg"},
        {
            "$project": {
                "owner": 1,
                "seg": 1,
                "skip": {"$ifNull": ["$patch.ids", []]},
                "messages": {
                    "$cond": [
                        _is(_OPEN),
                        "$messages",
                        {"$cond": [_is(_PATCH), "$patch.messages", {"$literal": []}]},
                    ]
                },
                # a task key never holds the page separator: the other segments find no page
                "ids": {"$cond": [_is(_SEALED), _page_ids(), "$_id"]},
            }
        },
        {
            "$lookup": {
                "from": PAGES_COLLECTION,
                "localField": "ids",
                "foreignField": "_id",
                "as": "page",
            }
        },
        {"$unwind": {"path": "$page", "preserveNullAndEmptyArrays": True}},
        {
            "$project": {
                "owner": 1,
                "keep": {
                    "$cond": [
                        _is(_SEALED),
                        {
                            "$and": [
                                {"$eq": ["$page.tenant", {"$literal": tenant}]},
                                {"$eq": ["$page.task", "$_id"]},
                            ]
                        },
                        True,
                    ]
                },
                "messages": {
                    "$cond": [
                        _is(_SEALED),
                        {
                            "$filter": {
                                "input": {"$ifNull": ["$page.messages", []]},
                                "as": "m",
                                "cond": {"$eq": [{"$in": ["$$m.id", "$skip"]}, False]},
                            }
                        },
                        "$messages",
                    ]
                },
            }
        },
        {"$match": {"keep": True}},
        {"$project": {"owner": 1, "messages": 1}},
    ]
    return stages


def paged_or(match: Mapping[str, Any], field: str) -> dict[str, Any]:
    """A task `$match` whose condition on `field` (a message field, say the time hint
    ``messages.started_ts``) holds for unpaged tasks only: a paged task may hold the
    matching messages in its pages alone, so it is kept whatever its open page holds."""
    if field not in match:
        return dict(match)
    out = {k: v for k, v in match.items() if k != field}
    either = [{field: match[field]}, {"pages": {"$gt": 0}}]
    if "$or" in out:
        out["$and"] = [*out.pop("$and", []), {"$or": out.pop("$or")}, {"$or": either}]
    else:
        out["$or"] = either
    return out
