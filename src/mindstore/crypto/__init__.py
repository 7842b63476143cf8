"""Per-tenant envelope encryption with crypto-shredding (docs/encryption.md).

from mindstore.crypto import Keyring, LocalMasterKey
keyring = Keyring(LocalMasterKey.from_file("master.key"))
store = await mindstore.connect(uri, keyring=keyring)
await store.keyring.rotate("acme")    # new writes use a new data key
await store.keyring.shred("acme")     # every copy of acme's content becomes unreadable
"""

from mindstore.crypto.keyring import Keyring, KeyStatus, MissingKey
from mindstore.crypto.master import LocalMasterKey, MasterKey

__all__ = ["KeyStatus", "Keyring", "LocalMasterKey", "MasterKey", "MissingKey"]
