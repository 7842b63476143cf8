"""The records restore has checked, kept for its write pass: each backup record is parsed once.

Restore checks the whole backup before it writes anything, then writes. Reading the backup
again for the writes would parse every record's Extended JSON a second time (the costly
part of reading a backup: a Python hook per subdocument), and would need the files to stay
unchanged in between. Instead the checking pass appends each batch of checked records (in
the form restore writes: re-keyed) to a spool, and the write pass takes them from there:

* BSON, the form the driver sends anyway: it keeps every type and the key order, and
  reading it back is C code (`bson.decode_all`), with the cyclic collector paused;
* zlib level 1 per batch, in an anonymous temporary file (no name, so nothing else can
  open it; gone when closed): disk, not memory, whatever the backup's size;
* a 16-byte BLAKE2b digest per batch, checked before the batch is decoded: what the
  write pass writes is exactly what the checking pass checked.

Memory: one batch, plus 24 bytes per batch.
"""

from __future__ import annotations

import hashlib
import tempfile
import zlib
from collections.abc import Iterator
from typing import IO, Any

import bson
from bson.codec_options import CodecOptions

from mindstore.model.collector import collector_paused

from .codec import LOAD_OPTIONS
from .errors import BackupCorrupt

__all__ = ["CheckedSpool"]

_DIGEST_BYTES = 16
#: How the records are read back: as `decode_line` hands them over (aware UTC datetimes).
_OPTIONS: CodecOptions[dict[str, Any]] = CodecOptions(
    document_class=dict,
    tz_aware=LOAD_OPTIONS.tz_aware,
    tzinfo=LOAD_OPTIONS.tzinfo,
    uuid_representation=LOAD_OPTIONS.uuid_representation,
    datetime_conversion=LOAD_OPTIONS.datetime_conversion,
)


def _digest(blob: bytes) -> bytes:
    return hashlib.blake2b(blob, digest_size=_DIGEST_BYTES).digest()


class CheckedSpool:
    """Batches of checked records per collection, in the order they were added."""

    def __init__(self) -> None:
        self._file: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
        self._batches: dict[str, list[tuple[int, int, bytes]]] = {}
        self._end = 0

    def add(self, name: str, records: list[dict[str, Any]]) -> None:
        """Keep a batch of records; a record BSON cannot hold is refused now, before any
        write (the driver would refuse it half-way through the restore)."""
        encoded = []
        for record in records:
            try:
                encoded.append(bson.encode(record))
            except (bson.errors.InvalidDocument, OverflowError, TypeError, ValueError) as exc:
                raise BackupCorrupt(
                    f"{name}: record {record.get('_id')!r:.60} cannot be stored in MongoDB: "
                    f"{str(exc)[:200]}"
                ) from None
        blob = zlib.compress(b"".join(encoded), 1)
        self._file.seek(self._end)
        self._file.write(blob)
        self._batches.setdefault(name, []).append((self._end, len(blob), _digest(blob)))
        self._end += len(blob)

    def count(self, name: str) -> int:
        """Batches kept for `name`."""
        return len(self._batches.get(name, []))

    def batches(self, name: str) -> Iterator[list[dict[str, Any]]]:
        """The batches of `name`, each as it was added (`BackupCorrupt` if one changed)."""
        for offset, length, digest in self._batches.get(name, []):
            self._file.seek(offset)
            blob = self._file.read(length)
            if len(blob) != length or _digest(blob) != digest:
                raise BackupCorrupt(
                    f"restore's spool of checked {name} records changed since it was "
                    f"written; nothing more written"
                )
            with collector_paused():
                records: list[dict[str, Any]] = bson.decode_all(zlib.decompress(blob), _OPTIONS)
            yield records

    def close(self) -> None:
        self._file.close()
