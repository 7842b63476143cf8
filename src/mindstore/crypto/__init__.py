"""Per-tenant envelope encryption with crypto-shredding (docs/encryption.md).

from mindstore.crypto import Keyring, LocalKeyVault, LocalMasterKey
keyring = Keyring(LocalKeyVault("/var/lib/mindstore/vault", LocalMasterKey.from_file("master.key")))
store = await mindstore.connect(uri, keyring=keyring)
await store.keyring.rotate("acme")    # new writes use a new data key
await store.keyring.shred("acme")     # every copy of acme's content becomes unreadable
"""

from mindstore.crypto.keyring import Keyring, KeyStatus, MigrationReport, MissingKey
from mindstore.crypto.master import LocalMasterKey, MasterKey
from mindstore.crypto.provider import KekState, KeyProvider
from mindstore.crypto.vault import LocalKeyVault, VaultError

__all__ = [
    "KekState",
    "KeyProvider",
    "KeyStatus",
    "Keyring",
    "LocalKeyVault",
    "LocalMasterKey",
    "MasterKey",
    "MigrationReport",
    "MissingKey",
    "VaultError",
]
