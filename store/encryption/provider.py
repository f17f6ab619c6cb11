"""What wraps a tenant's data keys: :class:`KeyProvider`, the one interface a key service
implements (a local key file ships, :mod:`store.encryption.local`; a cloud KMS is the
user's few lines, ``docs/encryption.md``)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["KeyProvider"]


@runtime_checkable
class KeyProvider(Protocol):
    """A key-encryption key (KEK) service: it wraps the data keys chatledger makes and
    unwraps them again; the KEK itself never leaves it.

    ``key_id`` names the key :meth:`wrap` uses now; :meth:`unwrap` is given the id a data
    key was wrapped under, which may be an older key the provider still holds (after a
    rotation of the KEK, until ``chatledger keys rotate --kek`` has rewrapped every data
    key). A provider that cannot unwrap raises any exception: chatledger reports it as
    :class:`~store.errors.WrongKey`, naming the key id.
    """

    @property
    def key_id(self) -> str:
        """The id of the key :meth:`wrap` wraps under (stored beside each wrapped key)."""
        ...

    async def wrap(self, data_key: bytes) -> bytes:
        """``data_key`` wrapped under the key :attr:`key_id` names."""
        ...

    async def unwrap(self, wrapped: bytes, key_id: str) -> bytes:
        """The data key ``wrapped`` holds, wrapped under the key ``key_id`` names."""
        ...
