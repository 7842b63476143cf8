"""Key providers backed by a KMS: AWS KMS, Google Cloud KMS, HashiCorp Vault Transit.

Each keeps one key-encryption key per tenant in its service and implements
`mindstore.crypto.KeyProvider`; docs/key-providers.md has their setup and what a shred
means in each service. They take the service's client as an argument, typed by a small
Protocol of the calls they make, so mindstore depends on no cloud SDK:

    from mindstore.crypto import Keyring
    from mindstore.crypto.providers import AwsKmsProvider
    keyring = Keyring(AwsKmsProvider(kms_client, prefix="mindstore"))
"""

from mindstore.crypto.providers.aws_kms import AwsKmsClient, AwsKmsProvider
from mindstore.crypto.providers.gcp_kms import GcpKmsClient, GcpKmsProvider
from mindstore.crypto.providers.vault_transit import VaultClient, VaultTransitProvider

__all__ = [
    "AwsKmsClient",
    "AwsKmsProvider",
    "GcpKmsClient",
    "GcpKmsProvider",
    "VaultClient",
    "VaultTransitProvider",
]
