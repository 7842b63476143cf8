"""SQLAlchemy URL sources: the URL checked, the database's tables read, before a
framework's own reader (which would create its tables in an empty database) is given
it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from sqlalchemy import inspect
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from mindstore.imports.driver import UnreadableSource

__all__ = ["open_checked"]


def _url(kind: str, source: str) -> URL:
    try:
        url = make_url(source)
    except ArgumentError:
        raise UnreadableSource(kind, source, "not a SQLAlchemy URL") from None
    if url.get_backend_name() == "sqlite":
        database = url.database or ""
        if database in ("", ":memory:") or database.startswith("file:"):
            raise UnreadableSource(kind, source, "an in-memory SQLite database holds nothing")
        if not Path(database).is_file():
            raise UnreadableSource(kind, source, "no such file")
    return url


async def open_checked(
    kind: str, source: str, tables: Mapping[str, set[str]]
) -> tuple[AsyncEngine, dict[str, set[str]]]:
    """An async engine on `source` and its tables' columns, after checking it has each of
    `tables` with at least the columns named; else `UnreadableSource`. The caller disposes
    of the engine."""
    url = _url(kind, source)
    try:
        engine = create_async_engine(url)
    except (ArgumentError, SQLAlchemyError, ImportError) as error:
        raise UnreadableSource(kind, source, f"cannot open ({error})") from None
    try:
        async with engine.connect() as connection:
            found = await connection.run_sync(
                lambda sync: {
                    name: {column["name"] for column in inspect(sync).get_columns(name)}
                    for name in inspect(sync).get_table_names()
                }
            )
    except (SQLAlchemyError, OSError) as error:
        await engine.dispose()
        raise UnreadableSource(kind, source, f"cannot read ({error})") from None
    for table, columns in tables.items():
        missing = table not in found or columns - found[table]
        if missing:
            await engine.dispose()
            what = f"no {table!r} table" if table not in found else (
                f"table {table!r} lacks {', '.join(sorted(columns - found[table]))}")  # fmt: skip
            raise UnreadableSource(kind, source, f"{what}: not a {kind} store")
    return engine, found
