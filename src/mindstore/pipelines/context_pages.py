"""The context window of a paged level in one pipeline: the task document, then its pages
by `$lookup`, the checkpoint's id lists never leaving the server (pure builders).

`pipelines.context` builds the model window of a level in one pipeline over one
document. A paged task's level spans its sealed pages (`task_pages`) and its open page
(the task document), so `paged_window_pipeline` runs over the task document and looks
its pages up by `_id` (``page_key(task, n)`` for ``n < pages``, built on the server, as
`paged_history.stages` does), in four phases, each `$lookup` followed by the `$unwind`
of its result (MongoDB folds the two, so no document ever holds all the pages):

1. **checkpoint**: the level's last compression message: the open page's, else the last
   one any page holds (only when the open page holds none are the pages looked up);
   `compressed`, `stubbed` and `anchor` are taken out of it as working fields;
2. **counts**: every page's level, view, visible and model-visible counts and its system
   messages, with those lists (the same view as the one-document pipeline: the level
   without compression messages, minus what the checkpoint dropped, its stubbed tool
   results cut to a skeleton; `visible` what a model may see, plus the summary anchor);
3. **open page**: the task document looked up again by its `_id` (the first `$match`
   could not keep its messages through phase 1's `$unwind` without copying them per
   page), its counts and its share of the wanted positions;
4. **slices**: each page's share of the wanted positions, from the counts of the pages
   before it (`$sum` over a field path), then only the pages holding a share looked up
   again and sliced (`$slice` with computed arguments).

The wanted positions: the first `head` messages of the view (the level's opening
context) and a run of the visible messages: the last `tail` (a window) or ``[start,
start + count)`` (a widening read). Tenant scope: the first `$match` is the view's task
filter; `$lookup` in the portable form (``localField``/``foreignField``: the embedded
backend has no ``pipeline``/``let``) takes no filter, so every looked-up document is
tested right after its `$unwind` (a page must carry the tenant and name the task, the
task document the tenant and, on an owner-scoped view, the owner) and one that fails
counts as absent before any of its fields is read.

Stages add fields with `$set` (MongoDB >= 4.2's `$addFields`) and drop working arrays
with an exclusion `$project` before the next `$unwind`; a `$group` brings the rows back
into one, the fields every row shares in its key (no accumulator that depends on order).

One row comes back (`paged_window_pipeline`'s docstring lists its fields). A real server
does not read the looked-up documents at one snapshot with the task document, so the row
carries the versions seen: the reader starts over when a page is newer than the task
document or the task document changed between the `$match` and its lookup.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mindstore.collection_names import TASK_PAGES, TASKS
from mindstore.ids import PAGE_KEY_SEPARATOR
from mindstore.pipelines.boundaries import (
    Pipeline,
    TaskFilter,
    _in_level_expr,
    _task_match,
    literal,
)
from mindstore.pipelines.context import (
    CHECKPOINT_PATH,
    MAX_SLICE,
    _stub_skeleton,
    model_visible_expr,
)

PAGING = ("version", "sealed", "pages", "seq", "pending")
"""The task document's paging fields, returned as read by the first `$match`."""
CHECKPOINT = ("mark_id", "cp", "compressed", "stubbed", "anchor")
"""The checkpoint's working fields (phase 1 on)."""
COUNTS = ("level_count", "view_count", "visible_count", "model_count")
CUT_ID_LISTS = (
    "cp.compressed_message_ids",
    "cp.kept_message_ids",
    f"{CHECKPOINT_PATH}.compressed_message_ids",
    f"{CHECKPOINT_PATH}.kept_message_ids",
    f"{CHECKPOINT_PATH}.metadata.stubbed_message_ids",
)
"""Id lists left on the server (`pipelines.context.CHECKPOINT_ID_LISTS`)."""


def _if_null(expression: Any, default: Any) -> dict[str, Any]:
    return {"$ifNull": [expression, default]}


def _set(**new: Any) -> dict[str, Any]:
    """A `$set` stage (MongoDB >= 4.2's alias of `$addFields`): the `new` fields beside the
    document's, so a stage names only what it adds, not everything it keeps."""
    return {"$set": new}


def _drop(*names: str) -> dict[str, Any]:
    """An exclusion `$project`: working fields no later stage reads (before an `$unwind`,
    which would copy them into every row, or the end)."""
    return {"$project": dict.fromkeys(names, 0)}


def _regroup(same: tuple[str, ...], **accumulators: Any) -> Pipeline:
    """The rows an `$unwind` made, one again: grouped by the task and the `same` fields
    (the same in every row: the key carries them through, no accumulator picks one), then
    those fields back at the top with the `accumulators`' results."""
    key = {"key": "$_id", **{name: f"${name}" for name in same}}
    return [
        {"$group": {"_id": key, **accumulators}},
        {
            "$project": {
                "_id": "$_id.key",
                **{name: f"$_id.{name}" for name in same},
                **dict.fromkeys(accumulators, 1),
            }
        },
    ]


def _known_row(row: Mapping[str, int]) -> dict[str, Any]:
    """A page's counts as phase 2 leaves them, from a `known` entry (the counts a run
    needs: where each page's visible messages start; no system messages)."""
    return {
        "page": int(row["p"]),
        "view_count": int(row["w"]),
        "visible_count": int(row["v"]),
        "level_count": 0,
        "model_count": 0,
        "systems": [],
    }


def _project_out(fields: tuple[str, ...]) -> dict[str, Any]:
    """The row sent: an inclusion `$project` of `fields`."""
    return {"$project": dict.fromkeys(fields, 1)}


def _page_ids() -> dict[str, Any]:
    """The `_id`s of the task's visible pages, ``key#0 .. key#(pages-1)``."""
    return {
        "$map": {
            "input": {"$range": [0, _if_null("$pages", 0)]},
            "as": "n",
            "in": {"$concat": ["$_id", PAGE_KEY_SEPARATOR, {"$toString": "$$n"}]},
        }
    }


def _own_page(field: str, tenant: str) -> dict[str, Any]:
    """The looked-up page in `field` is this tenant's and this task's."""
    return {
        "$and": [
            {"$eq": [_if_null(f"${field}.tenant", None), literal(tenant)]},
            {"$eq": [_if_null(f"${field}.task", None), "$_id"]},
        ]
    }


def _own_task(field: str, tenant: str, owner: str | None) -> dict[str, Any]:
    """The looked-up task document in `field` is in the view (tenant, owner)."""
    tests: list[Any] = [{"$eq": [_if_null(f"${field}.tenant", None), literal(tenant)]}]
    if owner is not None:
        tests.append({"$eq": [_if_null(f"${field}.owner", None), literal(owner)]})
    return {"$and": tests}


def _last_mark(messages: Any, scope: str | None) -> dict[str, Any]:
    """The level's last compression message among `messages`, as a list of at most one."""
    is_mark = {"$and": [_in_level_expr(scope), {"$eq": ["$$m.role", "compression"]}]}
    return {"$slice": [{"$filter": {"input": messages, "as": "m", "cond": is_mark}}, -1]}


def _level(messages: Any, scope: str | None) -> dict[str, Any]:
    not_mark = {"$and": [_in_level_expr(scope), {"$ne": ["$$m.role", "compression"]}]}
    return {"$filter": {"input": messages, "as": "m", "cond": not_mark}}


def _view(level: str) -> dict[str, Any]:
    """`level` minus the ids the checkpoint dropped, its stubbed ones cut to a skeleton."""
    dropped = {
        "$and": [
            {"$in": ["$$m.id", "$compressed"]},
            {"$eq": [{"$in": ["$$m.id", "$stubbed"]}, False]},
        ]
    }
    kept = {"$filter": {"input": level, "as": "m", "cond": {"$eq": [dropped, False]}}}
    stub = {"$cond": [{"$in": ["$$m.id", "$stubbed"]}, _stub_skeleton(), "$$m"]}
    return {"$map": {"input": kept, "as": "m", "in": stub}}


def _visible(view: str) -> dict[str, Any]:
    cond = {"$or": [model_visible_expr(), {"$eq": ["$$m.id", "$anchor"]}]}
    return {"$filter": {"input": view, "as": "m", "cond": cond}}


def _counted(messages: Any, scope: str | None) -> Pipeline:
    """Stages adding `level`, `n_level` (its size), `view` and `visible` of `messages`
    (the checkpoint's fields present)."""
    return [
        _set(level=_level(messages, scope)),
        _set(n_level={"$size": "$level"}, view=_view("$level")),
        _set(visible=_visible("$view")),
    ]


def _model_count() -> dict[str, Any]:
    return {"$size": {"$filter": {"input": "$visible", "as": "m", "cond": model_visible_expr()}}}


def _systems() -> dict[str, Any]:
    return {"$filter": {"input": "$view", "as": "m", "cond": {"$eq": ["$$m.role", "system"]}}}


def _stubbed_among(ids: Any) -> dict[str, Any]:
    return {"$filter": {"input": ids, "as": "i", "cond": {"$in": ["$$i", "$stubbed"]}}}


def _slice_or_none(array: str, start: Any, count: Any) -> dict[str, Any]:
    """``array[start:start+count]``, or nothing when `count` is not positive."""
    return {
        "$cond": [
            {"$gt": [count, 0]},
            {"$slice": [array, {"$max": [start, 0]}, {"$max": [count, 1]}]},
            literal([]),
        ]
    }


def _checkpoint_phase(scope: str | None, tenant: str) -> Pipeline:
    """Phase 1: the level's latest checkpoint and its working fields."""
    paging = (*PAGING, "om")
    return [
        {"$project": {**dict.fromkeys(PAGING, 1), "om": _last_mark("$messages", scope)}},
        _set(mids={"$cond": [{"$gt": [{"$size": "$om"}, 0]}, literal([]), _page_ids()]}),
        {"$lookup": {"from": TASK_PAGES, "localField": "mids", "foreignField": "_id", "as": "mp"}},
        {"$unwind": {"path": "$mp", "preserveNullAndEmptyArrays": True}},
        _set(own=_own_page("mp", tenant)),
        _set(
            pn={"$cond": ["$own", _if_null("$mp.page", -1), -1]},
            pm={
                "$cond": [
                    "$own",
                    _last_mark(_if_null("$mp.messages", []), scope),
                    literal([]),
                ]
            },
            pv={"$cond": ["$own", _if_null("$mp.version", 0), 0]},
        ),
        *_regroup(
            paging,
            marks={"$push": {"page": "$pn", "mark": "$pm"}},
            last={"$max": {"$cond": [{"$gt": [{"$size": "$pm"}, 0]}, "$pn", -1]}},
            page_version={"$max": "$pv"},
        ),
        _set(
            marked={
                "$filter": {
                    "input": "$marks",
                    "as": "x",
                    "cond": {"$and": [{"$gte": ["$last", 0]}, {"$eq": ["$$x.page", "$last"]}]},
                }
            },
        ),
        {"$unwind": {"path": "$marked", "preserveNullAndEmptyArrays": True}},
        _set(
            mark={"$cond": [{"$gt": [{"$size": "$om"}, 0]}, "$om", _if_null("$marked.mark", [])]},
        ),
        {"$unwind": {"path": "$mark", "preserveNullAndEmptyArrays": True}},
        _set(
            mark_id=_if_null("$mark.id", None),
            cp={
                "$slice": [
                    {
                        "$filter": {
                            "input": _if_null("$mark.content", []),
                            "as": "p",
                            "cond": {"$ne": [_if_null("$$p.metadata.checkpoint", None), None]},
                        }
                    },
                    1,
                ]
            },
        ),
        {"$unwind": {"path": "$cp", "preserveNullAndEmptyArrays": True}},
        _set(
            compressed=_if_null(f"${CHECKPOINT_PATH}.compressed_message_ids", []),
            stubbed=_if_null(f"${CHECKPOINT_PATH}.metadata.stubbed_message_ids", []),
            anchor=_if_null(f"${CHECKPOINT_PATH}.metadata.summary_after_id", None),
        ),
        _drop("om", "marks", "last", "marked", "mark"),
    ]


def _counts_phase(scope: str | None, tenant: str) -> Pipeline:
    """Phase 2: every page's counts and system messages, as `rows`."""
    base = (*PAGING, "page_version", *CHECKPOINT)
    return [
        _set(pids=_page_ids()),
        {"$lookup": {"from": TASK_PAGES, "localField": "pids", "foreignField": "_id", "as": "sp"}},
        {"$unwind": {"path": "$sp", "preserveNullAndEmptyArrays": True}},
        _set(own=_own_page("sp", tenant)),
        _set(
            pn={"$cond": ["$own", _if_null("$sp.page", -1), -1]},
            pv={"$cond": ["$own", _if_null("$sp.version", 0), 0]},
            messages={"$cond": ["$own", _if_null("$sp.messages", []), literal([])]},
        ),
        _drop("sp", "pids", "own"),
        *_counted("$messages", scope),
        *_regroup(
            tuple(name for name in base if name != "page_version"),
            page_version={"$max": {"$max": ["$page_version", "$pv"]}},
            rows={
                "$push": {
                    "page": "$pn",
                    "level_count": "$n_level",
                    "view_count": {"$size": "$view"},
                    "visible_count": {"$size": "$visible"},
                    "model_count": _model_count(),
                    "systems": _systems(),
                }
            },
        ),
        _set(
            rows={"$filter": {"input": "$rows", "as": "r", "cond": {"$gte": ["$$r.page", 0]}}},
        ),
    ]


def _open_phase(
    scope: str | None, tenant: str, owner: str | None, head: int, tail: int | None,
    start: int, count: int,
) -> Pipeline:  # fmt: skip
    """Phase 3: the open page's counts and its share of the wanted positions; the wanted
    visible run as `lo`/`hi` (positions in the level's visible messages)."""
    totals = {f"p_{name}": {"$sum": f"$rows.{name}"} for name in ("view_count", "visible_count")}
    if tail is not None:
        everything = {"$add": ["$p_visible_count", "$o_visible_count"]}
        run = {"lo": {"$max": [{"$subtract": [everything, tail]}, 0]}, "hi": everything}
    else:
        run = {"lo": literal(start), "hi": literal(start + count)}
    open_lo = {"$subtract": ["$lo", "$p_visible_count"]}
    open_hi = {"$min": [{"$subtract": ["$hi", "$p_visible_count"]}, "$o_visible_count"]}
    open_head = {"$min": [{"$subtract": [head, "$p_view_count"]}, "$o_view_count"]}
    return [
        _set(**totals),
        {"$lookup": {"from": TASKS, "localField": "_id", "foreignField": "_id", "as": "op"}},
        {"$unwind": {"path": "$op", "preserveNullAndEmptyArrays": True}},
        _set(own=_own_task("op", tenant, owner)),
        _set(
            open_version={"$cond": ["$own", _if_null("$op.version", 0), -1]},
            messages={"$cond": ["$own", _if_null("$op.messages", []), literal([])]},
        ),
        _drop("op", "own"),
        *_counted("$messages", scope),
        _set(
            o_level_count="$n_level",
            o_view_count={"$size": "$view"},
            o_visible_count={"$size": "$visible"},
            o_model_count=_model_count(),
            o_systems=_systems(),
        ),
        _set(**run),
        _set(
            o_head=_slice_or_none("$view", 0, open_head),
            o_run=_slice_or_none(
                "$visible", open_lo, {"$subtract": [open_hi, {"$max": [open_lo, 0]}]}
            ),
        ),
        _set(
            o_stubbed_head=_stubbed_among("$o_head.id"),
            o_stubbed_run=_stubbed_among("$o_run.id"),
        ),
        _drop("messages", "level", "n_level", "view", "visible"),
    ]


def _slices_phase(scope: str | None, tenant: str, head: int) -> Pipeline:
    """Phase 4: each page's share of the wanted positions, only those pages looked up."""
    opened = (*PAGING, "page_version", *CHECKPOINT, "open_version", "lo", "hi",
              "o_level_count", "o_view_count", "o_visible_count", "o_model_count",
              "o_systems", "o_head", "o_run", "o_stubbed_head", "o_stubbed_run")  # fmt: skip
    before = {
        "$map": {
            "input": "$rows",
            "as": "r",
            "in": {
                "page": "$$r.page",
                "view_count": "$$r.view_count",
                "visible_count": "$$r.visible_count",
                **{
                    f"before_{name}": {
                        "$map": {
                            "input": {
                                "$filter": {
                                    "input": "$rows",
                                    "as": "q",
                                    "cond": {"$lt": ["$$q.page", "$$r.page"]},
                                }
                            },
                            "as": "q",
                            "in": f"$$q.{name}",
                        }
                    }
                    for name in ("view_count", "visible_count")
                },
            },
        }
    }
    share = {
        "$map": {
            "input": "$before",
            "as": "r",
            "in": {
                "page": "$$r.page",
                "head": {"$min": [{"$subtract": [head, {"$sum": "$$r.before_view_count"}]},
                                  "$$r.view_count"]},
                "lo": {"$max": [{"$subtract": ["$lo", {"$sum": "$$r.before_visible_count"}]}, 0]},
                "hi": {"$min": [{"$subtract": ["$hi", {"$sum": "$$r.before_visible_count"}]},
                                "$$r.visible_count"]},
            },
        }
    }  # fmt: skip
    wanted = {
        "$filter": {
            "input": "$share",
            "as": "s",
            "cond": {"$or": [{"$gt": ["$$s.head", 0]}, {"$gt": ["$$s.hi", "$$s.lo"]}]},
        }
    }
    page_id = {"$concat": ["$_id", PAGE_KEY_SEPARATOR, {"$toString": "$want.page"}]}
    return [
        _set(before=before),
        _set(share=share),
        _set(
            systems={
                "$filter": {
                    "input": {
                        "$map": {
                            "input": "$rows",
                            "as": "r",
                            "in": {"page": "$$r.page", "systems": "$$r.systems"},
                        }
                    },
                    "as": "r",
                    "cond": {"$gt": [{"$size": "$$r.systems"}, 0]},
                }
            },
            **{name: {"$add": [{"$sum": f"$rows.{name}"}, f"$o_{name}"]} for name in COUNTS},
            want=wanted,
            known={
                "$map": {
                    "input": {
                        "$filter": {
                            "input": "$rows",
                            "as": "r",
                            "cond": {"$gt": ["$$r.view_count", 0]},
                        }
                    },
                    "as": "r",
                    "in": {"p": "$$r.page", "w": "$$r.view_count", "v": "$$r.visible_count"},
                }
            },
        ),
        _drop("rows", "before", "share"),
        {"$unwind": {"path": "$want", "preserveNullAndEmptyArrays": True}},
        _set(
            wid={"$cond": [{"$gte": [_if_null("$want.page", -1), 0]}, page_id, None]},
        ),
        {"$lookup": {"from": TASK_PAGES, "localField": "wid", "foreignField": "_id", "as": "wp"}},
        {"$unwind": {"path": "$wp", "preserveNullAndEmptyArrays": True}},
        _set(own=_own_page("wp", tenant)),
        _set(
            wv={"$cond": ["$own", _if_null("$wp.version", 0), 0]},
            messages={"$cond": ["$own", _if_null("$wp.messages", []), literal([])]},
        ),
        _drop("wp", "wid", "own"),
        *_counted("$messages", scope),
        _set(
            page=_if_null("$want.page", -1),
            h=_slice_or_none("$view", 0, _if_null("$want.head", 0)),
            r=_slice_or_none(
                "$visible",
                _if_null("$want.lo", 0),
                {"$subtract": [_if_null("$want.hi", 0), _if_null("$want.lo", 0)]},
            ),
        ),
        _set(
            piece={
                "page": "$page",
                "head": "$h",
                "run": "$r",
                "stubbed_head": _stubbed_among("$h.id"),
                "stubbed_run": _stubbed_among("$r.id"),
            },
        ),
        *_regroup(
            tuple(
                name for name in (*opened, *COUNTS, "systems", "known") if name != "page_version"
            ),
            page_version={"$max": {"$max": ["$page_version", "$wv"]}},
            pieces={"$push": "$piece"},
        ),
    ]


def paged_window_pipeline(
    task: TaskFilter,
    scope: str | None,
    *,
    tenant: str,
    owner: str | None = None,
    head: int,
    tail: int | None = None,
    start: int = 0,
    count: int = 0,
    known: Sequence[Mapping[str, int]] | None = None,
) -> Pipeline:
    """One row: a paged level's first `head` view messages and a run of its visible
    messages (its last `tail`, or without `tail` the ``[start, start + count)``), its
    system messages, its counts and its latest checkpoint without the id lists.

    Row fields: `version`, `sealed`, `pages`, `seq`, `pending` (the task document as the
    `$match` read it), `page_version` (the newest version of a page read), `open_version`
    (the task document's version when looked up again; -1 if it left the view),
    `mark_id` and `cp` (the checkpoint's message id and part, absent without one),
    `stubbed_count`, `level_count`, `view_count`, `visible_count`, `model_count`,
    `systems` (``[{page, systems}]``, pages holding some, in no order), `o_systems`,
    `pieces` (``[{page, head, run, stubbed_head, stubbed_run}]``, in no order; page -1
    holds nothing), `o_head`, `o_run`, `o_stubbed_head`, `o_stubbed_run` (the open page's
    share); `stubbed_*`: the ids among those messages that the checkpoint stubbed;
    `known`: the counts of each page holding some of the view (``[{p: page, w: view
    count, v: visible count}]``; a page holding none shifts no position).

    `known`: the `known` of an earlier row read at the same task version: the pages are
    not counted again (the caller checks the version: the counts hold only for the state
    they were read in), only those holding a share of the run are looked up."""
    head = max(0, min(head, MAX_SLICE))
    if tail is not None:
        tail = max(1, min(tail, MAX_SLICE))
    start = max(0, min(start, MAX_SLICE))
    count = max(0, min(count, MAX_SLICE - start))
    sent = ("o_head", "o_run", "o_stubbed_head", "o_stubbed_run")
    return [
        _task_match(task),
        *_checkpoint_phase(scope, tenant),
        *(
            _counts_phase(scope, tenant)
            if known is None
            else [_set(rows=literal([_known_row(row) for row in known]))]
        ),
        *_open_phase(scope, tenant, owner, head, tail, start, count),
        *_slices_phase(scope, tenant, head),
        _set(stubbed_count={"$size": "$stubbed"}),
        _project_out(
            (
                *PAGING,
                "page_version",
                "open_version",
                "mark_id",
                "cp",
                *COUNTS,
                "systems",
                "o_systems",
                "pieces",
                *sent,
                "stubbed_count",
                "known",
            ),
        ),
        {"$project": dict.fromkeys(CUT_ID_LISTS, 0)},
    ]
