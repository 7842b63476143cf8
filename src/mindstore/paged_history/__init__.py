"""The paged-history reader: the one package that knows the page layout for readers.

A paged task's older messages live in sealed `task_pages` documents, its recent ones in
the task document (docs/data-model.md, "Paged messages"). Readers that run over many
tasks at once (analytics, backup) read histories through this package:

* `layout`: the rules (pure): page ids, visibility (``page < pages``), pending entries
  applied on top of a page;
* `stages`: aggregation stages that read whole histories on the server (pure builders);
* `reader`: `PagedHistory`, the reads (pages in order, pending patches).

The write side (seals, folds: `mindstore.repositories.pages`, `bulk_pages`) and the
task repository's own range reads keep their page code for now (docs/architecture.md).
"""

from mindstore.paged_history.layout import (
    PAGE_KEY_SEPARATOR,
    apply_pending,
    folded_page,
    folded_task,
    is_paged,
    is_visible,
    page_count,
    page_key,
    page_ranges,
    pending_pages,
    touched_clause,
    visible_clause,
    visible_ids,
)
from mindstore.paged_history.reader import IncompleteHistory, PagedHistory
from mindstore.paged_history.stages import PAGES_COLLECTION, Patch, history_stages, paged_or

__all__ = [
    "PAGES_COLLECTION",
    "PAGE_KEY_SEPARATOR",
    "IncompleteHistory",
    "PagedHistory",
    "Patch",
    "apply_pending",
    "folded_page",
    "folded_task",
    "history_stages",
    "is_paged",
    "is_visible",
    "page_count",
    "page_key",
    "page_ranges",
    "paged_or",
    "pending_pages",
    "touched_clause",
    "visible_clause",
    "visible_ids",
]
