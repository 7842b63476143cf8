"""The embedded backend: mongomock behind pymongo's *async* API.

mindstore is written against pymongo's `AsyncMongoClient` / `AsyncDatabase` /
`AsyncCollection`. mongomock (4.3) imitates pymongo's synchronous API, and lags pymongo
4.11+. `EmbeddedClient` -> `EmbeddedDatabase` -> `EmbeddedCollection` give the pymongo
async surface mindstore and Beanie 2.2 use, over ``mongomock.MongoClient(tz_aware=True)``
directly (no motor-style adapter in between: every method is written here):

* every operation is a coroutine; ``await coll.aggregate(...)`` returns an async command
  cursor, as pymongo's does (Beanie awaits it);
* ``list_collection_names(authorizedCollections=..., nameOnly=...)`` is accepted (Beanie);
* ``bulk_write`` runs each `InsertOne`/`UpdateOne`/`UpdateMany`/`ReplaceOne`/`DeleteOne`/
  `DeleteMany` itself: pymongo >= 4.11 passes ``sort=`` to mongomock's bulk builder, which
  rejects it. ``sort`` on `UpdateOne`/`ReplaceOne`/`update_one`/`replace_one` is honoured;
* ``create_indexes`` keeps ``partialFilterExpression`` (mongomock's drops it);
* ``session=`` is accepted and ignored (mongomock raises on any session); there are no
  transactions (`EmbeddedSession.start_transaction` raises);
* ``hint=`` is ignored (mongomock raises on it); it never changes results, only plans;
* a duplicate key error names its index, ``keyPattern`` and ``keyValue``, as a server's
  does (`duplicate_keys`; mongomock's carries no details).

Fidelity. Every command goes through BSON as it would over the wire: the command document
pymongo would send is encoded (its size is what the `CommandRecorder` reports) and decoded
again before mongomock sees it, so a value pymongo cannot encode fails here too
(`bson.errors.InvalidDocument`), tuples become lists, and aware datetimes become naive UTC
(as the server stores them; this also avoids mongomock's naive/aware comparison errors in
pipelines). Returned documents are encoded (for `bytes_received`) and decoded with
``tz_aware=True, tzinfo=datetime.timezone.utc``: every datetime comes back aware, with
``tzinfo is datetime.timezone.utc`` (not mongomock's FixedOffset), as from
`open_backend`'s real client.

Every operation starts with ``await asyncio.sleep(0)``, and every getMore batch of a cursor
with another, so concurrent coroutines interleave between operations as they would over
a network; each mongomock operation itself then runs without yielding (it is atomic, as a
single-document write is on a server).

Layout (each module one concern; imports flow downwards only):

* `codec` -- BSON round trips, sizes, pymongo argument shapes, cursor batch planning (pure);
* `reporting` -- one `Operation` per command, reported to the `CommandRecorder`;
* `cursors` -- `EmbeddedCursor` (find) and `EmbeddedCommandCursor` (aggregate, listIndexes);
* `pipeline` -- aggregation on mongomock, a leading `$match` run as a `find`;
* `collection_base`, `reads`, `writes`, `find_and_modify`, `bulk`, `indexes` -- the parts
  `collection.EmbeddedCollection` is assembled from;
* `fast_update`, `guard_index` -- updates of mindstore's shape applied in place, without
  mongomock's whole-document copy, with the same results (``fast_updates=False`` on the
  client runs every update mongomock's way);
* `id_lookup` -- filters that pin `_id` find their documents by key in mongomock's store
  instead of testing every document, with the same results (``fast_reads=False`` on the
  client scans every time);
* `bit_queries` -- `$bitsAllSet` (mongomock lacks it), for the sealed-id filter;
* `array_ranges` -- `$range` (mongomock lacks it), for analytics over paged tasks;
* `array_slices` -- `$slice` with computed position and count (mongomock takes literals
  only), for the paged context window;
* `unwind` -- `$unwind` of a top-level array without copying the array per element, for
  the pages the paged context window looks up;
* `duplicate_keys` -- duplicate key errors with a server's details;
* `empty_timestamps` -- mongomock's document normaliser in fewer steps per value, and an
  empty BSON timestamp nested in a document stored as given (mongomock
  replaced it with the current time; a server does so only in an inserted top-level field);
* `expressions` -- aggregation expressions evaluated with fewer steps (operator dispatch,
  variable reads, comparisons of two numbers or strings), with the same results;
* `matching` -- mongomock's query matcher with the work that depends only on a filter field
  done once per field, not once per value its path reaches, with the same results;
* `int32` -- the 32-bit integer arguments `$range` and `$slice` take;
* `database` -- `EmbeddedDatabase`; `client` -- `EmbeddedClient` and `EmbeddedSession`.

Importing this package imports mongomock; `mindstore` itself imports it only when an
embedded backend is opened.
"""

from . import (
    array_ranges,
    array_slices,
    bit_queries,
    empty_timestamps,
    expressions,
    matching,
    unwind,
)
from .client import EmbeddedClient, EmbeddedSession
from .codec import OUT_CODEC_OPTIONS
from .collection import EmbeddedCollection
from .cursors import EmbeddedCommandCursor, EmbeddedCursor
from .database import EmbeddedDatabase

expressions.install()
matching.install()
array_ranges.install()
array_slices.install()
unwind.install()
bit_queries.install()
empty_timestamps.install()

__all__ = [
    "OUT_CODEC_OPTIONS",
    "EmbeddedClient",
    "EmbeddedCollection",
    "EmbeddedCommandCursor",
    "EmbeddedCursor",
    "EmbeddedDatabase",
    "EmbeddedSession",
]
