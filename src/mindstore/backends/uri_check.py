"""MongoDB URIs checked locally before connecting, and shown without their password.

pymongo validates URI options only with a warning and then ignores them, so a typo such
as ``serverSelectionTimeoutMS=abc`` would silently become a 30-second default wait. The
library's `connect()` and the CLI both refuse such a URI at once with a one-line
`ConfigurationError`.
"""

from __future__ import annotations

import re

from ..errors import ConfigurationError

__all__ = ["check_uri", "redact_uri"]

_SCHEMES = ("mongodb://", "mongodb+srv://")


def redact_uri(uri: str) -> str:
    """The URI without its password (``mongodb://user:***@host/db``)."""
    return re.sub(r"(://[^:/@]*:)[^@/]*@", r"\1***@", uri)


def check_uri(uri: str | None) -> None:
    """Refuse a MongoDB URI whose options are invalid, before connecting.

    Parsing is local: no DNS lookup for ``mongodb+srv://`` (only its options are checked
    here; the connection checks the rest). Anything that is not a MongoDB URI (embedded,
    or a scheme `open_backend` refuses with its own message) passes through.
    """
    if not isinstance(uri, str) or not uri.strip().lower().startswith(_SCHEMES):
        return
    from pymongo import uri_parser

    text = uri.strip()
    try:
        if text.lower().startswith("mongodb+srv://"):
            query = text.split("?", 1)[1] if "?" in text else ""
            if query:
                uri_parser.split_options(query, validate=True, warn=False)
        else:
            uri_parser.parse_uri(text, validate=True, warn=False)
    except Exception as exc:  # InvalidURI, ConfigurationError, ValueError: all "bad URI"
        raise ConfigurationError(
            f"invalid MongoDB URI {redact_uri(text)!r}: {str(exc).splitlines()[0][:200]}"
        ) from None
