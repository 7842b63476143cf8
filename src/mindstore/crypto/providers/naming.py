"""The name of a tenant's key in a KMS: one name per tenant, never one name for two.

Tenant ids use ``[A-Za-z0-9_-.:]`` (1-128 characters); each service accepts a narrower
alphabet, so the name is an escaped form of the tenant id that decodes back to it. An
escape is the service's spare character followed by one more; where the escaped form is
too long for the service, the name carries a SHA-256 of the tenant instead (a form no
escaped name can take).

* **AWS KMS aliases** (``alias/`` + ``[A-Za-z0-9/_-]``, 256 characters at most):
  ``alias/<prefix>-<tenant>``, where ``/`` escapes: an upper-case letter is ``/`` and the
  letter in lower case (so two tenants differing only in case never meet on one alias,
  whether or not alias names compare case-blind), ``.`` is ``/-``, ``:`` is ``/_``, and
  ``/0`` starts the hashed form.
* **Google Cloud KMS CryptoKey ids** (``[A-Za-z0-9_-]``, 63 characters at most) and
  **Vault Transit key names** (word characters, ``-``, ``.``, ``@``; a word character at
  both ends): ``<prefix>-<tenant>``, where ``_`` escapes: ``_`` is ``__``, ``.`` is ``_d``,
  ``:`` is ``_c``, a ``-`` ending the tenant id is ``_h``, and ``_x`` starts the hashed
  form (Google Cloud only; Vault names have no such limit).

A prefix is 1-32 characters of ``[A-Za-z0-9_]`` (16 for Google Cloud): without ``-`` it
cannot run into the tenant part, so two prefixes never share a name either.
Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable

from mindstore.errors import ValidationError
from mindstore.ids import check_key

__all__ = [
    "AWS_ALIAS_LIMIT",
    "GCP_KEY_ID_LIMIT",
    "aws_alias",
    "aws_alias_tenant",
    "aws_tombstone_alias",
    "check_prefix",
    "gcp_key_id",
    "underscore_escape",
    "underscore_unescape",
    "vault_key_name",
    "vault_tombstone_name",
]

AWS_ALIAS_LIMIT = 256
GCP_KEY_ID_LIMIT = 63
_PREFIX = re.compile(r"[A-Za-z0-9_]+")
_AWS_ESCAPES = {".": "/-", ":": "/_"}
_AWS_UNESCAPES = {"-": ".", "_": ":"}
_UNDERSCORE_ESCAPES = {"_": "__", ".": "_d", ":": "_c"}
_UNDERSCORE_UNESCAPES = {"_": "_", "d": ".", "c": ":", "h": "-"}


def _unescaped(text: str, escape: str, decode: Callable[[str], str | None]) -> str | None:
    """`text` with each `escape` and the character after it replaced by what `decode` makes
    of that character; None where `decode` makes nothing of it (or `text` ends in `escape`)."""
    out, index = [], 0
    while index < len(text):
        char = text[index]
        if char != escape:
            out.append(char)
            index += 1
            continue
        decoded = decode(text[index + 1 : index + 2])
        if decoded is None:
            return None
        out.append(decoded)
        index += 2
    return "".join(out)


def check_prefix(prefix: object, *, limit: int = 32, what: str = "prefix") -> str:
    """`prefix` if it is 1-`limit` characters of ``[A-Za-z0-9_]``; a `ValidationError`
    naming `what` otherwise."""
    if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix) or len(prefix) > limit:
        raise ValidationError(
            f"invalid {what}: expected 1-{limit} characters of [A-Za-z0-9_], got {prefix!r}"
        )
    return prefix


def _checked(tenant: str, name: str, encode: Callable[[str], str]) -> str | None:
    """`tenant` if encoding it gives `name` back (so every name decodes to one tenant at
    most, and only names this module makes decode at all)."""
    try:
        return tenant if encode(tenant) == name else None
    except ValidationError:
        return None


def _digest(tenant: str) -> str:
    return hashlib.sha256(tenant.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------------- AWS KMS
def _aws_escape(tenant: str) -> str:
    out = []
    for char in tenant:
        if "A" <= char <= "Z":
            out.append("/" + char.lower())
        else:
            out.append(_AWS_ESCAPES.get(char, char))
    return "".join(out)


def aws_alias(prefix: str, tenant: str) -> str:
    """The alias of `tenant`'s KMS key: ``alias/<prefix>-<escaped tenant>``, or the
    hashed form when that passes 256 characters."""
    check_key(tenant, "tenant")
    alias = f"alias/{prefix}-{_aws_escape(tenant)}"
    if len(alias) <= AWS_ALIAS_LIMIT:
        return alias
    return f"alias/{prefix}-/0{_digest(tenant)}"


def aws_alias_tenant(prefix: str, alias: str) -> str | None:
    """The tenant whose alias `alias` is (under `prefix`), or None: another prefix's, the
    hashed form, or not an alias this module makes."""
    head = f"alias/{prefix}-"
    if not alias.startswith(head):
        return None
    tenant = _unescaped(alias[len(head) :], "/", _aws_unescape)
    if tenant is None:
        return None  # "/0": the hashed form; anything else: not ours
    return _checked(tenant, alias, lambda tenant: aws_alias(prefix, tenant))


def _aws_unescape(code: str) -> str | None:
    if code.isascii() and code.islower():
        return code.upper()
    return _AWS_UNESCAPES.get(code)


def aws_tombstone_alias(prefix: str) -> str:
    """The alias of the provider's tombstone key: ``alias/<prefix>/shredded``. No tenant
    alias of any prefix can take it (a tenant alias has ``-`` right after its prefix, and
    prefixes hold neither ``-`` nor ``/``)."""
    return f"alias/{prefix}/shredded"


# ------------------------------------------------------- Google Cloud KMS, Vault
def underscore_escape(tenant: str) -> str:
    """`tenant` in ``[A-Za-z0-9_-]``, ending in a word character (``_`` escapes)."""
    check_key(tenant, "tenant")
    escaped = "".join(_UNDERSCORE_ESCAPES.get(char, char) for char in tenant)
    return escaped[:-1] + "_h" if escaped.endswith("-") else escaped


def underscore_unescape(escaped: str) -> str | None:
    """The tenant `escaped` is the escape of, or None if it is no escape's output."""
    tenant = _unescaped(escaped, "_", _UNDERSCORE_UNESCAPES.get)
    return None if tenant is None else _checked(tenant, escaped, underscore_escape)


def gcp_key_id(prefix: str, tenant: str) -> str:
    """The CryptoKey id of `tenant`: ``<prefix>-<escaped tenant>``, or the hashed form
    ``<prefix>-_x<40 hex digits>`` when that passes 63 characters."""
    key_id = f"{prefix}-{underscore_escape(tenant)}"
    if len(key_id) <= GCP_KEY_ID_LIMIT:
        return key_id
    return f"{prefix}-_x{_digest(tenant)[:40]}"


def vault_key_name(prefix: str, tenant: str) -> str:
    """The Transit key name of `tenant`: ``<prefix>-<escaped tenant>``."""
    return f"{prefix}-{underscore_escape(tenant)}"


def vault_tombstone_name(prefix: str, tenant: str) -> str:
    """The Transit key that marks `tenant` shredded: ``<prefix>.shredded-<escaped>``. No
    tenant key takes that name (a tenant key has ``-`` right after its prefix)."""
    return f"{prefix}.shredded-{underscore_escape(tenant)}"
