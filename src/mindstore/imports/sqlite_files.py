"""Reading a SQLite source's layout without touching it: the file is opened read-only
(``mode=ro``), so a wrong file is refused, never given a framework's empty tables."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote

from mindstore.imports.driver import UnreadableSource

__all__ = ["require_tables", "sqlite_file"]


def sqlite_file(kind: str, source: str | os.PathLike[str]) -> Path:
    """The source as an existing file, else `UnreadableSource` naming it."""
    path = Path(source)
    if not path.is_file():
        raise UnreadableSource(kind, str(source), "no such file")
    return path


def require_tables(kind: str, path: Path, tables: Mapping[str, set[str]]) -> dict[str, set[str]]:
    """The columns of every table in `path`, after checking it has each of `tables` with
    at least the columns named; else `UnreadableSource` saying what is missing."""
    try:
        connection = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro", uri=True)
        try:
            names = [row[0] for row in connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'"
            )]  # fmt: skip
            found = {
                name: {row[1] for row in connection.execute(f'PRAGMA table_info("{name}")')}
                for name in names
                if '"' not in name
            }
        finally:
            connection.close()
    except sqlite3.DatabaseError as error:
        raise UnreadableSource(kind, str(path), f"not a SQLite database ({error})") from None
    for table, columns in tables.items():
        if table not in found:
            raise UnreadableSource(kind, str(path), f"no {table!r} table: not a {kind} store")
        missing = columns - found[table]
        if missing:
            raise UnreadableSource(
                kind, str(path), f"table {table!r} lacks {', '.join(sorted(missing))}"
            )
    return found
