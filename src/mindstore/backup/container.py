"""Where a backup's files live: a directory or a tar archive; hashing readers and writers.

Writing goes to a hidden staging directory next to the destination and is moved into
place only when complete (`os.rename` of the directory, or `os.replace` of the finished
tar), so a crash never leaves something at the destination that looks like a backup.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import secrets
import shutil
import tarfile
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from mindstore.errors import BackupError

from .codec import encode_line
from .errors import BackupCorrupt, BackupIncomplete, BackupUnreadable
from .manifest import MANIFEST_NAME, FileEntry

__all__ = ["BackupReader", "HashingReader", "RecordWriter", "Staging", "open_backup"]

#: gzip level: 6 is zlib's default, ~3x faster than 9 for a few percent more bytes.
COMPRESS_LEVEL = 6
#: Encoded lines are handed to gzip in chunks of about this many bytes.
WRITE_CHUNK = 1 << 20
READ_CHUNK = 1 << 20


# --------------------------------------------------------------------------- writing


class _HashingWriter:
    """A binary file wrapper that hashes and counts everything written through it."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.sha256 = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.sha256.update(data)
        self.size += len(data)
        return self.raw.write(data)

    def flush(self) -> None:
        self.raw.flush()


class RecordWriter:
    """One collection's ``<name>.jsonl.gz``: documents in, `FileEntry` out."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._raw = open(path, "xb")
        os.chmod(path, 0o600)
        self._hashing = _HashingWriter(self._raw)
        self._gzip = gzip.GzipFile(
            filename="", fileobj=self._hashing, mode="wb", compresslevel=COMPRESS_LEVEL, mtime=0
        )
        self._buffer: list[bytes] = []
        self._buffered = 0
        self.count = 0

    def add(self, document: Mapping[str, Any]) -> None:
        line = encode_line(document)
        self._buffer.append(line)
        self._buffered += len(line)
        self.count += 1
        if self._buffered >= WRITE_CHUNK:
            self._drain()

    def _drain(self) -> None:
        if self._buffer:
            self._gzip.write(b"".join(self._buffer))
            self._buffer.clear()
            self._buffered = 0

    def close(self) -> FileEntry:
        self._drain()
        self._gzip.close()
        self._raw.flush()
        os.fsync(self._raw.fileno())
        self._raw.close()
        return FileEntry(
            self.path.name, self.count, self._hashing.size, self._hashing.sha256.hexdigest()
        )

    def abort(self) -> None:
        try:
            self._gzip.close()
        finally:
            self._raw.close()

    def discard(self) -> None:
        """Abort and remove the file (a collection the backup turned out not to hold)."""
        self.abort()
        self.path.unlink(missing_ok=True)


class Staging:
    """A hidden directory next to `dest` that becomes the backup (or its tar) at the end."""

    def __init__(self, dest: Path, *, tar: bool) -> None:
        self.dest = dest
        self.tar = tar
        check_destination(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        token = secrets.token_hex(4)
        self.dir = dest.parent / f".{dest.name}.partial-{token}"
        self.dir.mkdir(mode=0o700)

    def file(self, name: str) -> Path:
        return self.dir / name

    def write_bytes(self, name: str, data: bytes) -> None:
        path = self.dir / name
        with open(path, "xb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(path, 0o600)

    def commit(self, order: list[str], mtime: float) -> None:
        """Move the finished backup to its destination."""
        check_destination(self.dest)
        if not self.tar:
            if self.dest.is_dir():
                self.dest.rmdir()  # empty (checked): replaced by the finished directory
            os.rename(self.dir, self.dest)
            _fsync_dir(self.dest.parent)
            return
        tmp = self.dest.parent / f"{self.dir.name}.tar"
        try:
            with open(tmp, "xb") as raw:
                os.chmod(tmp, 0o600)
                with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as archive:
                    for name in order:
                        path = self.dir / name
                        info = tarfile.TarInfo(name)
                        info.size = path.stat().st_size
                        info.mtime = int(mtime)
                        info.mode = 0o600
                        info.uid = info.gid = 0
                        info.uname = info.gname = ""
                        with open(path, "rb") as source:
                            archive.addfile(info, source)
                raw.flush()
                os.fsync(raw.fileno())
            os.replace(tmp, self.dest)
            _fsync_dir(self.dest.parent)
        finally:
            if tmp.exists():
                tmp.unlink()
            shutil.rmtree(self.dir, ignore_errors=True)

    def abort(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def check_destination(dest: Path) -> None:
    if dest.is_dir():
        if any(dest.iterdir()):
            raise BackupError(f"backup destination {dest} already exists and is not empty")
    elif dest.exists() or dest.is_symlink():
        raise BackupError(f"backup destination {dest} already exists")


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- reading


class HashingReader:
    """A binary reader that hashes and counts what is read through it."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.sha256 = hashlib.sha256()
        self.size = 0

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(size)
        self.sha256.update(data)
        self.size += len(data)
        return data

    def drain(self) -> None:
        while self.read(READ_CHUNK):
            pass


class BackupReader:
    """The members of a backup (a directory or a tar archive), read-only."""

    kind = "directory"

    def __init__(self, path: Path) -> None:
        self.path = path

    def names(self) -> list[str]:
        """Every entry at the backup's root (a subdirectory is listed as ``name/``)."""
        out = []
        for entry in os.scandir(self.path):
            out.append(entry.name + "/" if entry.is_dir(follow_symlinks=False) else entry.name)
        return sorted(out)

    def size(self, name: str) -> int:
        return (self.path / name).stat().st_size

    def open(self, name: str) -> IO[bytes]:
        try:
            return open(self.path / name, "rb")
        except FileNotFoundError as exc:
            raise BackupIncomplete(f"{name} is missing from the backup") from exc

    def read_bytes(self, name: str) -> bytes:
        with self.open(name) as handle:
            return handle.read()

    def close(self) -> None:
        pass

    def __enter__(self) -> BackupReader:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class TarBackupReader(BackupReader):
    kind = "tar"

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        try:
            self._tar = tarfile.open(path, "r:*")
            members = self._tar.getmembers()
        except (tarfile.TarError, EOFError, OSError) as exc:
            if isinstance(exc, (tarfile.ReadError, EOFError)) and "unexpected end" in str(exc):
                raise BackupIncomplete(f"{path} is cut short: {exc}") from exc
            raise BackupUnreadable(f"{path} is not a readable tar archive: {exc}") from exc
        self._members: dict[str, tarfile.TarInfo] = {}
        self._extra: list[str] = []
        names: set[str] = set()
        for member in members:
            name = member.name
            while name.startswith("./"):
                name = name[2:]
            if name in ("", "."):
                continue
            if name.rstrip("/") in names:
                # `tar x` keeps the last copy, this reader would read the first: refuse
                self._tar.close()
                raise BackupCorrupt(f"{path}: the tar archive holds {name!r} twice")
            names.add(name.rstrip("/"))
            if not (member.isfile() or member.isdir()):
                self._tar.close()
                raise BackupCorrupt(
                    f"{path}: tar member {name!r} is a link or a special "
                    f"file; a backup holds regular files only"
                )
            if not member.isfile() or "/" in name:
                self._extra.append(name + ("/" if member.isdir() else ""))
                continue
            self._members[name] = member

    def names(self) -> list[str]:
        return sorted([*self._members, *self._extra])

    def size(self, name: str) -> int:
        member = self._members.get(name)
        if member is None:
            raise FileNotFoundError(name)
        return member.size

    def open(self, name: str) -> IO[bytes]:
        member = self._members.get(name)
        if member is None:
            raise BackupIncomplete(f"{name} is missing from the backup")
        handle = self._tar.extractfile(member)
        if handle is None:  # pragma: no cover - regular files always have one
            raise BackupUnreadable(f"cannot read {name} from {self.path}")
        return handle

    def close(self) -> None:
        self._tar.close()


def open_backup(path: str | os.PathLike[str]) -> BackupReader:
    """Open a backup directory or tar archive; `BackupUnreadable` if it is neither."""
    where = Path(path)
    try:
        if where.is_dir():
            os.listdir(where)  # permission check
            return BackupReader(where)
        if not where.exists():
            raise BackupUnreadable(f"no backup at {where}: no such file or directory")
        with open(where, "rb"):
            pass
        if not tarfile.is_tarfile(where):
            raise BackupUnreadable(f"{where} is neither a backup directory nor a tar archive")
    except PermissionError as exc:
        raise BackupUnreadable(f"cannot read {where}: permission denied") from exc
    except OSError as exc:
        raise BackupUnreadable(f"cannot read {where}: {exc.strerror or exc}") from exc
    return TarBackupReader(where)


__all__ += ["MANIFEST_NAME", "TarBackupReader", "check_destination"]
