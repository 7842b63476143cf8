"""Opening a backend: MongoDB when given a URI or a client, else the in-memory store.

``await open_backend()`` picks, in order: an existing `client`, the `uri` argument, the
``MINDSTORE_URI`` environment variable, else the embedded (in-memory) backend.
``mongodb://`` / ``mongodb+srv://`` connect to a server (and ping it, so a bad or
unreachable URI fails at once with a one-line `ConfigurationError` naming the host).
``"memory:"`` asks for the in-memory store explicitly (``"embedded"``, ``"memory"``,
``"mongomock"`` and ``"mongomock://..."`` are aliases). Both backends return datetimes
aware in `datetime.timezone.utc` and report every command to `Backend.recorder`.

The in-memory store keeps nothing when the process ends. Reached by default (no URI,
no client, no ``MINDSTORE_URI``), it says so with an `InMemoryStoreWarning`, once per
process: a service that lost one environment variable must not lose its data quietly.
Asked for by name, it is silent.

Monitoring. `event_listeners` are pymongo monitoring listeners, given to the
`AsyncMongoClient` next to the recorder's own `RecorderListener`; on the embedded backend
command listeners receive the same events for every command it runs (there is no
server, topology or pool for the other kinds to watch). Listeners registered
process-wide with `pymongo.monitoring.register` (OpenTelemetry's pymongo instrumentation
does this) reach both kinds without being passed. An existing `AsyncMongoClient` can be
given as `client` instead of a URI: it keeps its own listeners (to have the recorder count
its commands, build it with ``event_listeners=[RecorderListener(recorder)]`` and pass the
same `recorder`), and it stays the caller's: closing the backend does not close it.

Logging: the ``mindstore.backends.connection`` logger says at INFO what was opened or
connected to (URIs with their password masked).
"""

from __future__ import annotations

import datetime as _dt
import logging
import os
import re
import sys
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

from pymongo import AsyncMongoClient

from ..errors import ConfigurationError
from .recorder import CommandRecorder, RecorderListener
from .uri_check import check_uri, redact_uri
from .wire import LISTENER_TYPES, EventListener

__all__ = [
    "DEFAULT_DATABASE",
    "ENV_URI",
    "MEMORY_URI",
    "Backend",
    "InMemoryStoreWarning",
    "connect",
    "is_memory_uri",
    "open_backend",
    "redact_uri",
]

logger = logging.getLogger(__name__)

ENV_URI = "MINDSTORE_URI"
DEFAULT_DATABASE = "mindstore"
#: The explicit spelling of the in-memory store: ``connect("memory:")``.
MEMORY_URI = "memory:"
EMBEDDED_ALIASES = (MEMORY_URI, "memory", "embedded", "mongomock")


class InMemoryStoreWarning(UserWarning):
    """A store was opened in memory because no URI was given: nothing it holds is kept.

    Shown once per process (a `UserWarning`, so Python shows it by default). Silence it by
    choosing: a URI, ``MINDSTORE_URI``, or ``connect("memory:")`` for memory on purpose."""


IN_MEMORY_MESSAGE = (
    "no URI given and MINDSTORE_URI is not set: this mindstore store is in memory, and "
    "everything written to it is lost when the process ends. Pass a URI "
    "(connect('mongodb://...')), set MINDSTORE_URI, or ask for memory explicitly with "
    "connect('memory:')."
)

_warned_in_memory = False


def _caller_stacklevel() -> int:
    """The `stacklevel` that points a warning at the first frame outside mindstore (the
    application's ``await mindstore.connect()``), however many mindstore frames lie
    between. Counted from the function that calls `warnings.warn`."""
    level = 1
    frame: FrameType | None = sys._getframe(1)  # the caller of warnings.warn: level 1
    while frame is not None and _in_mindstore(frame):
        frame = frame.f_back
        level += 1
    return level


def _in_mindstore(frame: FrameType) -> bool:
    return str(frame.f_globals.get("__name__", "")).partition(".")[0] == "mindstore"


def _warn_in_memory() -> None:
    """`InMemoryStoreWarning`, the first time this process opens memory by default."""
    global _warned_in_memory
    if _warned_in_memory:
        return
    warnings.warn(IN_MEMORY_MESSAGE, InMemoryStoreWarning, stacklevel=_caller_stacklevel())
    _warned_in_memory = True  # after warn: under an "error" filter every such call raises


@dataclass
class Backend:
    """An open connection: `database` is what repositories and Beanie are given.

    `owns_client`: False for a client the caller passed in, which `close()` leaves open.
    """

    client: Any  # AsyncMongoClient or EmbeddedClient
    database: Any  # AsyncDatabase or EmbeddedDatabase
    kind: Literal["embedded", "mongodb"]
    recorder: CommandRecorder = field(default_factory=CommandRecorder)
    uri: str | None = None
    owns_client: bool = True

    @property
    def is_embedded(self) -> bool:
        return self.kind == "embedded"

    async def close(self) -> None:
        if self.owns_client:
            await self.client.close()

    async def __aenter__(self) -> Backend:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        if self.uri:
            where = redact_uri(self.uri)
        else:
            where = "embedded" if self.is_embedded else "(a given client)"
        return f"Backend(kind={self.kind!r}, database={self.database.name!r}, uri={where!r})"


def _hosts(uri: str) -> str:
    """The host list of a MongoDB URI, without credentials."""
    rest = uri.split("://", 1)[1] if "://" in uri else uri
    netloc = re.split(r"[/?]", rest, maxsplit=1)[0]
    if "@" in netloc:
        netloc = netloc.rsplit("@", 1)[1]
    return netloc or "(no host)"


def _client_hosts(client: Any) -> str:
    """The seed hosts of a pymongo client, read without any I/O."""
    try:
        addresses = list(client.topology_description.server_descriptions())
    except Exception:  # pragma: no cover - a client pymongo cannot describe
        return "(unknown host)"
    shown = [f"{host}:{port}" if port else str(host) for host, port in addresses]
    return ",".join(shown) or "(no host)"


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


def is_memory_uri(uri: str) -> bool:
    """Does `uri` name the in-memory store (``memory:`` or one of its aliases)?"""
    low = uri.strip().lower()
    return low in EMBEDDED_ALIASES or low.startswith("mongomock://")


def _check_listeners(event_listeners: Sequence[EventListener] | None) -> list[EventListener]:
    """`event_listeners` as a list of pymongo monitoring listeners, or ConfigurationError."""
    if event_listeners is None:
        return []
    if isinstance(event_listeners, (str, bytes, Mapping)) or not isinstance(
        event_listeners, Sequence
    ):
        raise ConfigurationError(
            "event_listeners must be a list of pymongo monitoring listeners, "
            f"not {type(event_listeners).__name__}"
        )
    for index, listener in enumerate(event_listeners):
        if not isinstance(listener, LISTENER_TYPES):
            raise ConfigurationError(
                f"event_listeners[{index}] must be a pymongo monitoring listener "
                f"(CommandListener, ServerListener, ...), not {type(listener).__name__}"
            )
    return list(event_listeners)


async def open_backend(
    uri: str | None = None,
    *,
    database: str | None = None,
    timeout_ms: int = 5000,
    recorder: CommandRecorder | None = None,
    event_listeners: Sequence[EventListener] | None = None,
    client: AsyncMongoClient[Any] | None = None,
) -> Backend:
    """Open the embedded backend or connect to MongoDB (see the module docstring).

    Database name: `database`, else the URI's (or client's) default database, else
    ``"mindstore"``. `recorder`: where every command is reported (default: a new
    sizes-only `CommandRecorder`; ``CommandRecorder(keep_payloads=True)`` keeps what was
    sent). `event_listeners`: pymongo monitoring listeners. `client`: an existing
    `pymongo.AsyncMongoClient` to use instead of a URI. Raises `ConfigurationError` for an
    unsupported, unparsable or unreachable URI or client, and for bad arguments.
    """
    listeners = _check_listeners(event_listeners)
    if recorder is not None and not isinstance(recorder, CommandRecorder):
        raise ConfigurationError(
            f"recorder must be a CommandRecorder, not {type(recorder).__name__}"
        )
    if client is not None:
        if uri is not None:
            raise ConfigurationError("pass either a uri or a client, not both")
        if listeners:
            raise ConfigurationError(
                "event_listeners cannot be added to an existing client: pass them to "
                "AsyncMongoClient(..., event_listeners=[...]) instead"
            )
        return await _use_client(client, database=database, recorder=recorder)
    if uri is None:
        uri = os.environ.get(ENV_URI) or None
        if uri is None:
            _warn_in_memory()
    if recorder is None:
        recorder = CommandRecorder()
    if uri is None or is_memory_uri(uri):
        from .embedded import EmbeddedClient  # loads mongomock: only when asked for

        name = database or (_uri_database(uri) if uri else None) or DEFAULT_DATABASE
        embedded = EmbeddedClient(
            recorder=recorder, default_database=name, event_listeners=listeners
        )
        logger.info("opened an embedded (in-memory) store, database %r", name)
        return Backend(
            client=embedded,
            database=embedded.get_database(name),
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
            f"or {MEMORY_URI!r} for the in-memory store"
        )
    check_uri(stripped)  # options pymongo would only warn about and ignore
    return await _connect_mongodb(
        stripped, database=database, timeout_ms=timeout_ms, recorder=recorder, listeners=listeners
    )


async def _ping(client: Any, hosts: str, *, close_on_failure: bool) -> None:
    """Fail at once, in one line naming the hosts, if the server cannot be used."""
    from pymongo.errors import OperationFailure, PyMongoError

    try:
        await client.admin.command("ping")
    except OperationFailure as exc:
        if close_on_failure:
            await client.close()
        raise ConfigurationError(
            f"MongoDB at {hosts} refused the connection: {_first_line(exc)}"
        ) from exc
    except (PyMongoError, OSError) as exc:
        if close_on_failure:
            await client.close()
        raise ConfigurationError(f"cannot reach MongoDB at {hosts}: {_first_line(exc)}") from exc


def _database_name(client: Any, database: str | None, uri: str | None) -> str:
    if database:
        return database
    try:
        return str(client.get_default_database().name)
    except Exception:
        return (_uri_database(uri) if uri else None) or DEFAULT_DATABASE


async def _connect_mongodb(
    uri: str,
    *,
    database: str | None,
    timeout_ms: int,
    recorder: CommandRecorder,
    listeners: list[EventListener],
) -> Backend:
    import pymongo
    from pymongo.errors import PyMongoError

    hosts = _hosts(uri)
    options = _uri_options(uri)
    kwargs: dict[str, Any] = {
        "tz_aware": True,
        "tzinfo": _dt.UTC,
        "event_listeners": [RecorderListener(recorder), *listeners],
    }
    # keyword arguments override URI options in pymongo: only set what the URI leaves open
    if "serverselectiontimeoutms" not in options:
        kwargs["serverSelectionTimeoutMS"] = timeout_ms
    if "connecttimeoutms" not in options:
        kwargs["connectTimeoutMS"] = timeout_ms
    try:
        client: Any = pymongo.AsyncMongoClient(uri, **kwargs)
    except (PyMongoError, ValueError, TypeError) as exc:
        raise ConfigurationError(f"invalid MongoDB URI for {hosts}: {_first_line(exc)}") from exc
    await _ping(client, hosts, close_on_failure=True)
    name = _database_name(client, database, uri)
    logger.info("connected to MongoDB at %s, database %r", redact_uri(uri), name)
    return Backend(
        client=client,
        database=client.get_database(name),
        kind="mongodb",
        recorder=recorder,
        uri=uri,
    )


async def _use_client(
    client: Any, *, database: str | None, recorder: CommandRecorder | None
) -> Backend:
    """A backend over the caller's `AsyncMongoClient` (pinged, never closed here)."""
    if not isinstance(client, AsyncMongoClient):
        raise ConfigurationError(
            f"client must be a pymongo AsyncMongoClient, not {type(client).__name__}"
        )
    if recorder is None:  # the recorder the client's own RecorderListener feeds, if any
        fed = [
            listener.recorder
            for listener in client.options.event_listeners
            if isinstance(listener, RecorderListener)
        ]
        recorder = fed[0] if fed else CommandRecorder()
    hosts = _client_hosts(client)
    await _ping(client, hosts, close_on_failure=False)
    name = _database_name(client, database, None)
    logger.info("using the given MongoDB client at %s, database %r", hosts, name)
    return Backend(
        client=client,
        database=client.get_database(name),
        kind="mongodb",
        recorder=recorder,
        owns_client=False,
    )


#: The name the design uses for it.
connect = open_backend
