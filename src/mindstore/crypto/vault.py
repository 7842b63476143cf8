"""The local key vault: one key-encryption key (KEK) per tenant, in files outside the database.

`LocalKeyVault(path, LocalMasterKey(...))` is the `KeyProvider` for a deployment without
a KMS. The vault is a directory (made owner-only on first use) holding:

* ``vault.json``: the format and the id of the master key that wraps the entries (a vault
  opened with another master key is refused before anything is read or written);
* one file per tenant, ``<hex of the tenant id>.kek``: JSON with the tenant's KEK
  wrapped by the master key (bound to the tenant), or, once shredded, a tombstone that
  holds no key at all.

Every file is written atomically (a temporary file in the vault, flushed and synced, then
linked or renamed into place, and the directory synced), so a crash leaves the old file
or the new one, never half of one. A tenant's first KEK is linked into place only if no
file exists (two processes making it at once agree on the one that landed), and `destroy`
replaces the entry by a tombstone, so a later `wrap` cannot make a new KEK for a shredded
tenant.

The vault is the one copy of the tenants' KEKs: back it up (docs/encryption.md, "The local
key vault"), and expire its old copies on a schedule, since a copy made before a shred
still holds that tenant's KEK. The master key wraps every entry; keep it apart from the
vault's backups.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import stat
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from mindstore.crypto.aead import KEY_BYTES, context_bytes
from mindstore.crypto.master import MasterKey
from mindstore.crypto.provider import KekState
from mindstore.errors import ConfigurationError, CryptoError, KeyShredded
from mindstore.ids import check_key

__all__ = ["LocalKeyVault", "VaultError"]

VAULT_FORMAT = 1
_HEADER = "vault.json"
_SUFFIX = ".kek"
_WRAP_FORMAT = b"\x02"
_NONCE_BYTES = 12
_TAG_BYTES = 16


class VaultError(ConfigurationError):
    """The key vault is missing, unreadable, corrupt, shared with other users, or was
    made with another master key. Nothing was read from it or written to it."""


def _kek_context(tenant: str) -> bytes:
    return context_bytes(("mindstore tenant kek", tenant, "", ""))


def _entry_name(tenant: str) -> str:
    return tenant.encode("utf-8").hex() + _SUFFIX


def _now() -> str:
    return datetime.now(UTC).isoformat()


class LocalKeyVault:
    """A `KeyProvider` keeping each tenant's KEK in a directory, wrapped by `master`."""

    def __init__(self, path: str | Path, master: MasterKey | None = None) -> None:
        if master is not None and not isinstance(master, MasterKey):
            raise ConfigurationError("master must implement mindstore.crypto.MasterKey")
        self.path = Path(path)
        self._master = master
        self._lock = asyncio.Lock()  # one writer per vault in this process (files: `link`)

    @property
    def master(self) -> MasterKey:
        """The master key (`destroy` and `status` work without one: a lost master key
        must not stop a shred)."""
        if self._master is None:
            raise ConfigurationError(
                f"key vault {str(self.path)!r}: wrapping and unwrapping need its master key"
            )
        return self._master

    @property
    def provider_id(self) -> str:
        return "vault:" + (self._master.key_id if self._master is not None else "?")

    # ------------------------------------------------------------------ files
    def _check_directory(self, *, create: bool) -> None:
        """The vault directory exists, is a directory and is the owner's alone; made
        (owner-only) when `create` and missing."""
        try:
            info = self.path.stat()
        except FileNotFoundError:
            if not create:
                raise VaultError(
                    f"key vault {str(self.path)!r} does not exist (it holds every encrypted "
                    "tenant's key: restore it from its backup, or name the right path)"
                ) from None
            self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
            info = self.path.stat()
        except OSError as exc:
            raise VaultError(f"key vault {str(self.path)!r}: {exc}") from None
        if not stat.S_ISDIR(info.st_mode):
            raise VaultError(f"key vault {str(self.path)!r} is not a directory")
        if info.st_mode & 0o077:
            raise VaultError(
                f"key vault {str(self.path)!r} is open to other users (mode "
                f"{stat.S_IMODE(info.st_mode):o}); make it the owner's alone: chmod 700"
            )
        self._check_header(create=create)

    def _check_header(self, *, create: bool) -> None:
        header = self.path / _HEADER
        if not header.exists():
            if not create and any(self.path.glob("*" + _SUFFIX)):
                raise VaultError(f"key vault {str(self.path)!r} has entries but no {_HEADER}")
            if create and self._master is not None:
                mine = {"format": VAULT_FORMAT, "master_key_id": self._master.key_id}
                self._write_new(header, mine)
            return
        found = self._read_json(header)
        if found.get("format") != VAULT_FORMAT:
            raise VaultError(
                f"key vault {str(self.path)!r}: unknown format {found.get('format')!r}"
            )
        if self._master is not None and found.get("master_key_id") != self._master.key_id:
            raise VaultError(
                f"key vault {str(self.path)!r} was made with master key "
                f"{found.get('master_key_id')!r}, not {self._master.key_id!r}"
            )

    def _read_json(self, file: Path) -> dict[str, Any]:
        try:
            data = json.loads(file.read_bytes())
        except FileNotFoundError:
            raise
        except (OSError, ValueError) as exc:
            raise VaultError(
                f"key vault file {str(file)!r} is unreadable or corrupt: {exc}"
            ) from None
        if not isinstance(data, dict):
            raise VaultError(f"key vault file {str(file)!r} is corrupt: not an object")
        return data

    def _temporary(self, data: dict[str, Any]) -> str:
        handle, name = tempfile.mkstemp(dir=self.path, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(json.dumps(data, sort_keys=True).encode("utf-8"))
                out.flush()
                os.fsync(out.fileno())
            os.chmod(name, 0o600)
        except BaseException:
            os.unlink(name)
            raise
        return name

    def _sync_directory(self) -> None:
        descriptor = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)

    def _write_new(self, file: Path, data: dict[str, Any]) -> bool:
        """Link `data` into place only if `file` does not exist; False if it did."""
        name = self._temporary(data)
        try:
            os.link(name, file)
        except FileExistsError:
            return False
        finally:
            os.unlink(name)
        self._sync_directory()
        return True

    def _replace(self, file: Path, data: dict[str, Any]) -> None:
        os.replace(self._temporary(data), file)
        self._sync_directory()

    def _entry(self, tenant: str) -> dict[str, Any] | None:
        try:
            entry = self._read_json(self.path / _entry_name(tenant))
        except FileNotFoundError:
            return None
        if entry.get("tenant") != tenant or entry.get("state") not in ("active", "destroyed"):
            raise VaultError(f"key vault entry of tenant {tenant!r} is corrupt")
        return entry

    # ------------------------------------------------------------------ KEKs
    async def _kek(self, tenant: str, *, create: bool) -> bytes:
        """The tenant's KEK, unwrapped; made now if `create` and it has none."""
        await asyncio.to_thread(self._check_directory, create=create)
        entry = await asyncio.to_thread(self._entry, tenant)
        if entry is None and create:
            kek = os.urandom(KEY_BYTES)
            wrapped = await self.master.wrap(kek, _kek_context(tenant))
            made = {"tenant": tenant, "state": "active", "created_at": _now(),
                    "wrapped": base64.b64encode(wrapped).decode("ascii")}  # fmt: skip
            async with self._lock:
                await asyncio.to_thread(self._write_new, self.path / _entry_name(tenant), made)
            entry = await asyncio.to_thread(self._entry, tenant)  # ours, or the one that won
        if entry is None:
            raise CryptoError(
                f"key vault {str(self.path)!r} holds no key for tenant {tenant!r} (another "
                "vault, or a copy of it older than the tenant's first key)"
            )
        if entry["state"] == "destroyed":
            raise KeyShredded(tenant)
        try:
            wrapped = base64.b64decode(str(entry.get("wrapped", "")), validate=True)
        except ValueError:
            raise VaultError(f"key vault entry of tenant {tenant!r} is corrupt") from None
        return await self.master.unwrap(wrapped, _kek_context(tenant))

    async def wrap(self, tenant: str, data_key: bytes, context: bytes) -> bytes:
        kek = AESGCM(await self._kek(check_key(tenant, "tenant"), create=True))
        nonce = os.urandom(_NONCE_BYTES)
        return _WRAP_FORMAT + nonce + kek.encrypt(nonce, data_key, _WRAP_FORMAT + context)

    async def unwrap(self, tenant: str, wrapped: bytes, context: bytes) -> bytes:
        kek = AESGCM(await self._kek(check_key(tenant, "tenant"), create=False))
        if wrapped[:1] != _WRAP_FORMAT or len(wrapped) < 1 + _NONCE_BYTES + _TAG_BYTES:
            raise CryptoError("not a data key wrapped by a local key vault")
        nonce = wrapped[1 : 1 + _NONCE_BYTES]
        try:
            return kek.decrypt(nonce, wrapped[1 + _NONCE_BYTES :], _WRAP_FORMAT + context)
        except InvalidTag:
            raise CryptoError(
                f"a data key of tenant {tenant!r} does not unwrap with its vault key (another "
                "tenant's or version's key, or a wrapped key moved or changed)"
            ) from None

    async def destroy(self, tenant: str) -> None:
        check_key(tenant, "tenant")
        tombstone = {"tenant": tenant, "state": "destroyed", "destroyed_at": _now()}
        # never made here: a vault that does not exist holds no tenant's KEK, and a
        # tombstone written into a new one (a mistyped path) would shred nothing
        await asyncio.to_thread(self._check_directory, create=False)
        async with self._lock:
            await asyncio.to_thread(self._destroy, tenant, tombstone)

    def _destroy(self, tenant: str, tombstone: dict[str, Any]) -> None:
        entry = self._entry(tenant)
        if entry is not None and entry["state"] == "destroyed":
            return
        self._replace(self.path / _entry_name(tenant), tombstone)

    async def status(self, tenant: str) -> KekState:
        check_key(tenant, "tenant")
        if not await asyncio.to_thread(self.path.exists):
            return "absent"
        await asyncio.to_thread(self._check_directory, create=False)
        entry = await asyncio.to_thread(self._entry, tenant)
        if entry is None:
            return "absent"
        state: KekState = "destroyed" if entry["state"] == "destroyed" else "active"
        return state

    def tenants(self) -> dict[str, KekState]:
        """Every tenant the vault has an entry for, with its state (for operators)."""
        self._check_directory(create=False)
        found: dict[str, KekState] = {}
        for file in sorted(self.path.glob("*" + _SUFFIX)):
            try:
                tenant = bytes.fromhex(file.name[: -len(_SUFFIX)]).decode("utf-8")
            except ValueError:
                raise VaultError(f"key vault file {file.name!r} is not a tenant entry") from None
            entry = self._entry(tenant)
            if entry is not None:
                found[tenant] = "destroyed" if entry["state"] == "destroyed" else "active"
        return found
