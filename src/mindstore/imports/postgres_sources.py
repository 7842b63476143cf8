"""PostgreSQL sources given as a libpq URL: ``postgresql://USER:PASSWORD@HOST:PORT/DB``
(or ``postgres://``; any libpq parameter in the query, such as ``?host=/run/postgresql``
for a unix socket or ``?sslmode=require``).

The session is opened read-only (the server then refuses any write on it, so a source is
never given a framework's tables or migrations), and the tables a framework reads are
checked, as its queries resolve them (the search path), before its reader is given the
connection.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from mindstore.imports.errors import UnreadableSource

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg.rows import DictRow

__all__ = ["SCHEMES", "is_postgres", "open_postgres"]

SCHEMES = ("postgresql://", "postgres://")
"""How a PostgreSQL URL begins (a SQLAlchemy URL, ``postgresql+asyncpg://``, is not one)."""
CONNECT_SECONDS = 10
"""How long to wait for the server before the source is called unreadable."""


def is_postgres(source: object) -> bool:
    """A PostgreSQL URL (`SCHEMES`), not a file, a SQLAlchemy URL or a MongoDB URI."""
    return isinstance(source, str) and source.startswith(SCHEMES)


def open_postgres(
    kind: str, source: str, tables: Mapping[str, set[str]]
) -> tuple[Connection[DictRow], dict[str, set[str]]]:
    """A read-only connection to `source` (autocommit, dict rows: what LangGraph's
    Postgres savers take) and the columns of each of `tables`, after checking each is
    there with at least the columns named; else `UnreadableSource`, the connection
    closed. The caller closes the connection."""
    import psycopg
    from psycopg.rows import dict_row

    try:
        connection = psycopg.Connection.connect(
            source, autocommit=True, prepare_threshold=0, row_factory=dict_row,
            connect_timeout=CONNECT_SECONDS,
        )  # fmt: skip
    except psycopg.Error as error:
        raise UnreadableSource(kind, source, f"cannot connect ({_first_line(error)})") from None
    try:
        connection.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
        found: dict[str, set[str]] = {}
        for table in tables:
            rows = connection.execute(
                "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s)"
                " AND attnum > 0 AND NOT attisdropped",
                (table,),
            ).fetchall()
            found[table] = {str(row["attname"]) for row in rows}
    except psycopg.Error as error:
        connection.close()
        raise UnreadableSource(kind, source, f"cannot read ({_first_line(error)})") from None
    for table, columns in tables.items():
        missing = columns - found[table]
        if missing:
            connection.close()
            what = f"no {table!r} table" if not found[table] else (
                f"table {table!r} lacks {', '.join(sorted(missing))}")  # fmt: skip
            raise UnreadableSource(kind, source, f"{what}: not a {kind} store")
    return connection, found


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
