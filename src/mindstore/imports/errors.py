"""The error an import raises for a source it cannot read."""

from __future__ import annotations

from mindstore.errors import ValidationError
from mindstore.imports.receipt import redacted

__all__ = ["UnreadableSource"]


class UnreadableSource(ValidationError):
    """The source is not what its kind reads: a missing file, another schema, not that
    framework's tables or documents. Raised before anything is written."""

    def __init__(self, kind: str, source: str, reason: str) -> None:
        super().__init__(f"{kind} source {redacted(source)!r}: {reason}")
        self.kind = kind
        self.source = redacted(source)
        self.reason = reason
