"""Search across a tenant's conversations (docs/search.md): `acme.search(query)`.

Pure parts: `tokenize` (text -> terms), `query` (the query language), `bm25` (the
score), `snippet` (excerpts), `text` (what of a message is searchable), `blind` (keyed
tokens under a keyring), `postings` (ids, blocks, binary postings), `codec` (a
message's entry under the tenant's codec; only `codec_for` asks the keyring). I/O:
`index` (a tenant's index: state and lookups), `catchup` (the index brought up to date by
each search), `lifecycle` (what a delete, a redaction, an erase removes), `service` (a
search), `admin` (rebuild, verify), `documents` (stored shapes, indexes).
"""

from __future__ import annotations

from mindstore.search.admin import SearchIndexAdmin, VerifyReport
from mindstore.search.query import ParsedQuery, parse_query
from mindstore.search.service import SearchHit, SearchPage
from mindstore.search.snippet import Snippet

__all__ = [
    "ParsedQuery",
    "SearchHit",
    "SearchIndexAdmin",
    "SearchPage",
    "Snippet",
    "VerifyReport",
    "parse_query",
]
