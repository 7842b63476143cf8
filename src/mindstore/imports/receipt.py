"""What an import reports: counts per kind, and digests of what was read and written.

Pure: no I/O. A digest is SHA-256 over canonical JSON (keys sorted, no spaces, UTF-8),
one line per conversation in the order of their ids, so the same source gives the same
digest whatever order its database returned rows in.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Receipt", "canonical_digest", "redacted"]

_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^:@/]*):[^@/]*@")
_PASSWORD_PARAMETER = re.compile(r"(?P<key>[?&]password=)[^&#]*", re.IGNORECASE)
"""A password given as a URL parameter (libpq and SQLAlchemy URLs accept one)."""


def canonical_digest(conversations: Iterable[tuple[str, Any]]) -> str:
    """SHA-256 of `(conversation id, JSON value)` pairs, sorted by id: one canonical JSON
    line each."""
    digest = hashlib.sha256()
    for conversation_id, value in sorted(conversations, key=lambda pair: pair[0]):
        line = json.dumps([conversation_id, value], sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False, allow_nan=False)  # fmt: skip
        digest.update(line.encode("utf-8") + b"\n")
    return digest.hexdigest()


def redacted(source: str) -> str:
    """`source` as a receipt may show it: a URL's password (in its user part or a
    ``password=`` parameter) replaced by ``***``."""
    source = _USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:***@", source)
    return _PASSWORD_PARAMETER.sub(lambda m: f"{m['key']}***", source)


@dataclass(frozen=True)
class Receipt:
    """The outcome of one `import_from` run.

    `read` counts what the source holds (per kind: conversations, messages, checkpoints,
    ...); `written` what this run wrote (zero for each kind on a second run, and on a dry
    run); `unchanged` the conversations already stored exactly as the source has them.
    `read_sha256` digests the source's conversations as the framework's own store returns
    them; `written_sha256` what mindstore's adapter serves for them after the run (None on
    a dry run): the two are equal when every conversation came over whole, which the
    import checks conversation by conversation (`verified`).
    """

    kind: str
    source: str
    tenant: str
    owner: str | None
    owner_from: str | None
    dry_run: bool
    read: Mapping[str, int]
    written: Mapping[str, int]
    unchanged: int
    verified: int
    read_sha256: str
    written_sha256: str | None
    conversations: tuple[str, ...] = field(default=())
    """The framework ids of the conversations read, in id order."""

    def to_json(self) -> dict[str, Any]:
        """The receipt as JSON (what `mindstore import --receipt FILE` writes)."""
        return {
            "kind": self.kind,
            "source": self.source,
            "tenant": self.tenant,
            "owner": self.owner,
            "owner_from": self.owner_from,
            "dry_run": self.dry_run,
            "read": dict(sorted(self.read.items())),
            "written": dict(sorted(self.written.items())),
            "unchanged": self.unchanged,
            "verified": self.verified,
            "read_sha256": self.read_sha256,
            "written_sha256": self.written_sha256,
            "conversations": list(self.conversations),
        }
