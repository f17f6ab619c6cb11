"""Encryption at rest (``docs/encryption.md``): a tenant's texts sealed with AES-GCM under
its data key, which a :class:`KeyProvider` wraps, each bound to its place::

    from store.encryption import KeyRing
    from store.encryption.local import LocalKeyProvider

    keys = KeyRing(LocalKeyProvider.from_file("chatledger.keys"))
    async with HistoryStore.open(url, tenant="acme", encryption=keys) as store:
        ...
"""

from store.encryption.provider import KeyProvider
from store.encryption.sealing import KeyRing

__all__ = ["KeyProvider", "KeyRing"]
