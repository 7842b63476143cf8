"""Search across a tenant's conversations (docs/search.md): `acme.search(query)`.

Pure parts: `tokenize` (text -> terms), `query` (the query language), `stopwords` (the
words a `match="any"` search leaves out), `modes` (the mode and match, checked), `bm25` (the
score), `snippet` (excerpts), `text` (what of a message is searchable), `blind` (keyed
tokens under a keyring), `postings` (ids, blocks, binary postings), `codec` (a
message's entry under the tenant's codec; only `codec_for` asks the keyring). I/O:
`index` (a tenant's index: state and lookups), `catchup` (the index brought up to date by
each search), `lifecycle` (what a delete, a redaction, an erase removes), `service` (a
search), `admin` (rebuild, verify), `documents` (stored shapes, indexes). Recall by
meaning: `embedder` (the `Embedder` protocol, a deterministic one), `providers` (OpenAI,
Gemini, sentence-transformers), `vectors` (a vector's stored form: pure), `vector_index`
(written by the catch-up, filled in), `fusion` (reciprocal rank fusion: pure),
`vector_search` (a semantic or hybrid search), `vector_server` (a server's vector index).
"""

from __future__ import annotations

from mindstore.search.admin import SearchIndexAdmin, VerifyReport
from mindstore.search.embedder import Embedder, HashingEmbedder, Purpose, embed_all
from mindstore.search.fusion import fuse
from mindstore.search.modes import Match, Mode, NoEmbedder
from mindstore.search.providers import (
    GeminiEmbedder,
    OpenAIEmbedder,
    SentenceTransformerEmbedder,
)
from mindstore.search.query import ParsedQuery, parse_query
from mindstore.search.service import SearchHit, SearchPage
from mindstore.search.snippet import Snippet

__all__ = [
    "Embedder",
    "GeminiEmbedder",
    "HashingEmbedder",
    "Match",
    "Mode",
    "NoEmbedder",
    "OpenAIEmbedder",
    "ParsedQuery",
    "Purpose",
    "SearchHit",
    "SearchIndexAdmin",
    "SearchPage",
    "SentenceTransformerEmbedder",
    "Snippet",
    "VerifyReport",
    "embed_all",
    "fuse",
    "parse_query",
]
