"""A key provider for tests: a fixed key-encryption key held in memory (the shipped
:class:`~store.encryption.local.LocalKeyProvider` reads one from a file)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from store.encryption import KeyRing


@dataclass
class MemoryKeyProvider:
    """Wraps data keys with AES-GCM under ``keys[key_id]`` (the newest is current)."""

    keys: dict[str, bytes] = field(default_factory=lambda: {"test-kek-1": bytes(range(32))})
    current: str = "test-kek-1"
    unwrapped: int = 0
    """How many times :meth:`unwrap` was called (a key service's round trips)."""

    @property
    def key_id(self) -> str:
        return self.current

    async def wrap(self, data_key: bytes) -> bytes:
        nonce = os.urandom(12)
        return nonce + AESGCM(self.keys[self.current]).encrypt(
            nonce, data_key, self.current.encode()
        )

    async def unwrap(self, wrapped: bytes, key_id: str) -> bytes:
        self.unwrapped += 1
        return AESGCM(self.keys[key_id]).decrypt(wrapped[:12], wrapped[12:], key_id.encode())

    def rotated(self) -> MemoryKeyProvider:
        """The same provider with a new current key (the old one kept for unwrapping)."""
        new_id = f"test-kek-{len(self.keys) + 1}"
        return MemoryKeyProvider({**self.keys, new_id: os.urandom(32)}, new_id)


def keyring_for_tests(provider: MemoryKeyProvider | None = None) -> KeyRing:
    """A key ring over ``provider`` (a new test provider when None)."""
    return KeyRing(provider or MemoryKeyProvider())
