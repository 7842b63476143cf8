"""Analytics over paged tasks: where it lives now (kept so this import path works).

A report over paged tasks used to run part of its stages in process; it now runs as one
pipeline on the server (`mindstore.pipelines.analytics_pages`), reading sealed pages
through the paged-history reader (`mindstore.paged_history`), whose pieces this module
re-exports.
"""

from __future__ import annotations

from mindstore.paged_history import PagedHistory, Patch, history_stages

__all__ = ["PagedHistory", "Patch", "history_stages"]
