"""Opening a backend: the embedded store by default, MongoDB when given a URI.

``await open_backend()`` picks, in order: the `uri` argument, the ``MINDSTORE_URI``
environment variable, else the embedded backend. ``"embedded"`` / ``"mongomock://..."``
ask for the embedded backend explicitly; ``mongodb://`` / ``mongodb+srv://`` connect to a
server (and ping it, so a bad or unreachable URI fails at once with a one-line
`ConfigurationError` naming the host). Both backends return datetimes aware in
`datetime.timezone.utc` and report every command to `Backend.recorder`.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

from ..errors import ConfigurationError
from .recorder import CommandRecorder, RecorderListener

__all__ = ["Backend", "DEFAULT_DATABASE", "ENV_URI", "connect", "open_backend", "redact_uri"]

ENV_URI = "MINDSTORE_URI"
DEFAULT_DATABASE = "mindstore"
EMBEDDED_ALIASES = ("embedded", "mongomock", "memory")


@dataclass
class Backend:
    """An open connection: `database` is what repositories and Beanie are given."""

    client: Any  # AsyncMongoClient or EmbeddedClient
    database: Any  # AsyncDatabase or EmbeddedDatabase
    kind: Literal["embedded", "mongodb"]
    recorder: CommandRecorder = field(default_factory=CommandRecorder)
    uri: str | None = None

    @property
    def is_embedded(self) -> bool:
        return self.kind == "embedded"

    async def close(self) -> None:
        await self.client.close()

    async def __aenter__(self) -> Backend:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __repr__(self) -> str:
        where = redact_uri(self.uri) if self.uri else "embedded"
        return f"Backend(kind={self.kind!r}, database={self.database.name!r}, uri={where!r})"


def redact_uri(uri: str) -> str:
    """The URI without its password (``mongodb://user:***@host/db``)."""
    return re.sub(r"(://[^:/@]*:)[^@/]*@", r"\1***@", uri)


def _hosts(uri: str) -> str:
    """The host list of a MongoDB URI, without credentials."""
    rest = uri.split("://", 1)[1] if "://" in uri else uri
    netloc = re.split(r"[/?]", rest, maxsplit=1)[0]
    if "@" in netloc:
        netloc = netloc.rsplit("@", 1)[1]
    return netloc or "(no host)"


def _uri_options(uri: str) -> set[str]:
    """Lower-cased option names given in the URI's query string."""
    query = urlsplit(uri).query if "?" in uri else ""
    return {part.split("=", 1)[0].lower() for part in query.split("&") if part}


def _uri_database(uri: str) -> str | None:
    rest = uri.split("://", 1)[1] if "://" in uri else ""
    if "/" not in rest:
        return None
    path = rest.split("/", 1)[1].split("?", 1)[0]
    return unquote(path) or None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    text = text.splitlines()[0]
    for cut in (" (configured timeouts", ", Timeout:", ", Topology Description:"):
        if cut in text:
            text = text.split(cut, 1)[0]
    return text[:300]


def _is_embedded(uri: str) -> bool:
    low = uri.strip().lower()
    return low in EMBEDDED_ALIASES or low.startswith("mongomock://")


async def open_backend(
    uri: str | None = None,
    *,
    database: str | None = None,
    timeout_ms: int = 5000,
    recorder: CommandRecorder | None = None,
) -> Backend:
    """Open the embedded backend or connect to MongoDB (see the module docstring).

    Database name: `database`, else the URI's default database, else ``"mindstore"``.
    `recorder`: where every command is reported (default: a new sizes-only
    `CommandRecorder`; pass ``CommandRecorder(keep_payloads=True)`` to keep what was sent).
    Raises `ConfigurationError` for an unsupported, unparsable or unreachable URI.
    """
    if uri is None:
        uri = os.environ.get(ENV_URI) or None
    if recorder is None:
        recorder = CommandRecorder()
    elif not isinstance(recorder, CommandRecorder):
        raise ConfigurationError(
            f"recorder must be a CommandRecorder, not {type(recorder).__name__}"
        )
    if uri is None or _is_embedded(uri):
        from .embedded import EmbeddedClient  # loads mongomock: only when asked for

        name = database or (_uri_database(uri) if uri else None) or DEFAULT_DATABASE
        client = EmbeddedClient(recorder=recorder, default_database=name)
        return Backend(
            client=client,
            database=client.get_database(name),
            kind="embedded",
            recorder=recorder,
            uri=None if uri is None else uri,
        )
    if not isinstance(uri, str):
        raise ConfigurationError(f"the MongoDB URI must be a string, not {type(uri).__name__}")
    stripped = uri.strip()
    if not stripped.lower().startswith(("mongodb://", "mongodb+srv://")):
        shown = redact_uri(stripped) if stripped else "(empty)"
        raise ConfigurationError(
            f"unsupported database URI {shown!r}: use mongodb://..., mongodb+srv://..., "
            f"or 'embedded' for the in-memory store"
        )
    return await _connect_mongodb(
        stripped, database=database, timeout_ms=timeout_ms, recorder=recorder
    )


async def _connect_mongodb(
    uri: str, *, database: str | None, timeout_ms: int, recorder: CommandRecorder
) -> Backend:
    import pymongo
    from pymongo.errors import ConfigurationError as PyMongoConfigurationError
    from pymongo.errors import OperationFailure, PyMongoError

    hosts = _hosts(uri)
    options = _uri_options(uri)
    kwargs: dict[str, Any] = {
        "tz_aware": True,
        "tzinfo": _dt.timezone.utc,
        "event_listeners": [RecorderListener(recorder)],
    }
    # keyword arguments override URI options in pymongo: only set what the URI leaves open
    if "serverselectiontimeoutms" not in options:
        kwargs["serverSelectionTimeoutMS"] = timeout_ms
    if "connecttimeoutms" not in options:
        kwargs["connectTimeoutMS"] = timeout_ms
    try:
        client = pymongo.AsyncMongoClient(uri, **kwargs)
    except (PyMongoError, ValueError, TypeError) as exc:
        raise ConfigurationError(f"invalid MongoDB URI for {hosts}: {_first_line(exc)}") from exc
    try:
        await client.admin.command("ping")
    except OperationFailure as exc:
        await client.close()
        raise ConfigurationError(
            f"MongoDB at {hosts} refused the connection: {_first_line(exc)}"
        ) from exc
    except (PyMongoError, OSError) as exc:
        await client.close()
        raise ConfigurationError(f"cannot reach MongoDB at {hosts}: {_first_line(exc)}") from exc
    name = database
    if not name:
        try:
            name = client.get_default_database().name
        except (PyMongoConfigurationError, Exception):
            name = _uri_database(uri) or DEFAULT_DATABASE
    return Backend(
        client=client,
        database=client.get_database(name),
        kind="mongodb",
        recorder=recorder,
        uri=uri,
    )


#: The name the design uses for it.
connect = open_backend
