"""Sealing a stored text: AES-GCM under a tenant's data key, bound to its place.

A sealed text is what a column holds instead of the text (a JSON string, so that it
fits the JSON columns as well as the text ones)::

    "cl1.<data key id>.<session, base64>.<nonce and ciphertext, base64>"

The associated data binds it to its place: the sealing format, the storage format
(:data:`~store.rules.storage_json.MESSAGE_FORMAT`), the tenant, the table, the session
the row belongs to, the row within it (a message's ``seq``, an event's id) and the
column. The session is written in the envelope too (authenticated, not secret): a
fork reads rows its parent owns (:mod:`store.sql.branches.rows`), so the reader of a
shared row is not its owner, and the reader accepts an owner only when it is itself or
a session of its lineage (:meth:`Sealing.note_lineage`). A text moved to another row,
column, session or tenant, a flipped bit, a truncated ciphertext and an unknown key id
each fail with :class:`~store.errors.CorruptRowError` naming the place; a text in clear
where a sealed one belongs fails the same way: nothing falls back to plaintext.

A tenant has data keys (one current, older ones readable until a rotation of the
tenant's key has rewritten their rows) and a hash key, each wrapped by the
:class:`~store.encryption.provider.KeyProvider`'s key and kept in the database
(:mod:`store.sql.keys`). The hash key keys the content hash of deduplication
(HMAC-SHA256 instead of SHA-256, :func:`store.rules.identity.keyed_hashing`), so that a
stored hash confirms no guess of the text; it is not rotated with the data key, since
the stored hashes must still compare (``docs/encryption.md``).
"""

from __future__ import annotations

import binascii
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from store.encryption.provider import KeyProvider
from store.errors import CorruptRowError, EncryptionError, WrongKey
from store.rules.storage_json import MESSAGE_FORMAT

__all__ = [
    "PREFIX",
    "SEAL_VERSION",
    "KeyRing",
    "Sealing",
    "UnknownDataKey",
    "WrappedKey",
    "is_sealed",
    "new_data_key",
]

SEAL_VERSION: Final = 1
"""The sealing format's version (in the envelope's prefix and the associated data)."""
PREFIX: Final = f'"cl{SEAL_VERSION}.'
"""How every sealed text starts (no JSON text chatledger writes in clear starts so)."""
_NONCE = 12
_TAG = 16
KEY_BYTES: Final = 32
"""AES-256: the size of every data key and hash key."""


def _aesgcm() -> type:
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError as error:  # pragma: no cover - the extra is missing
        raise EncryptionError(
            "encryption needs the cryptography package: pip install 'chatledger[encryption]'"
        ) from error
    return AESGCM


def new_data_key() -> bytes:
    """A fresh random key (a data key or a hash key)."""
    return os.urandom(KEY_BYTES)


def is_sealed(text: str | None) -> bool:
    """Whether a column's text is sealed (by its prefix; authenticity is another matter)."""
    return text is not None and text.startswith(PREFIX)


def _b64(data: bytes) -> str:
    """Standard base64 (its alphabet holds no ``.``, the envelope's separator)."""
    return binascii.b2a_base64(data, newline=False).decode("ascii")


def _unb64(text: str) -> bytes:
    return binascii.a2b_base64(text, strict_mode=True)


def _framed(part: str) -> bytes:
    data = part.encode("utf-8", "surrogatepass")
    return len(data).to_bytes(4, "big") + data


@dataclass(frozen=True, slots=True)
class WrappedKey:
    """A tenant's key as the database keeps it: its id, what it is for (``data`` or
    ``hash``), the id of the provider's key that wrapped it, and the wrapped bytes."""

    key_id: str
    purpose: str
    kek_id: str
    wrapped: bytes


class UnknownDataKey(CorruptRowError):
    """A text sealed under a data key this process has not read: another process made
    it since this one opened the tenant (a rotation), or the text is foreign. The store
    reads the tenant's keys again (:attr:`Sealing.reload`) and tries once more; a key
    still unknown then is a corrupt row."""


@dataclass(slots=True)
class Sealing:
    """One tenant's sealing: its data keys by id (``current`` seals), its hash key, the
    lineages of the forks read (which sessions' rows a fork may read), and how to read
    the tenant's keys again (``reload``: after a rotation another process made)."""

    tenant: str
    keys: Mapping[str, bytes]
    current: str
    hash_key: bytes
    reload: Callable[[], Awaitable[None]] | None = None
    _ciphers: dict[str, object] = field(default_factory=dict)
    _lineages: dict[str, frozenset[str]] = field(default_factory=dict)
    _heads: dict[tuple[str, str, str], bytes] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.learn(self.keys, self.current)

    def learn(self, keys: Mapping[str, bytes], current: str) -> None:
        """Know ``keys`` too (by id), and seal with ``current`` from now on."""
        aesgcm = _aesgcm()
        self._ciphers.update({key_id: aesgcm(key) for key_id, key in keys.items()})
        if current not in self._ciphers:
            raise EncryptionError(f"tenant {self.tenant!r}: its current data key is missing")
        self.current = current

    # -- the place -------------------------------------------------------------------

    def _associated(self, table: str, session_id: str, row: object, column: str) -> bytes:
        """The place as bytes: each part length-prefixed (no part can pass for two), the
        parts but the row's made once a (table, session, column)."""
        key = (table, session_id, column)
        head = self._heads.get(key)
        if head is None:
            parts = (str(SEAL_VERSION), str(MESSAGE_FORMAT), self.tenant, table, column, session_id)
            head = b"".join(_framed(part) for part in parts)
            if len(self._heads) >= 65536:
                self._heads.clear()
            self._heads[key] = head
        return head + _framed(str(row))

    def note_lineage(self, session_id: str, owners: frozenset[str]) -> None:
        """Let fork ``session_id`` read the rows ``owners`` sealed (its lineage)."""
        if len(self._lineages) >= 4096:
            self._lineages.clear()
        self._lineages[session_id] = owners

    # -- sealing and opening ---------------------------------------------------------

    def seal(self, text: str, table: str, session_id: str, row: object, column: str) -> str:
        """``text``, sealed for its place under the current data key."""
        nonce = os.urandom(_NONCE)
        cipher = self._ciphers[self.current]
        data = cipher.encrypt(  # type: ignore[attr-defined]
            nonce,
            text.encode("utf-8", "surrogatepass"),
            self._associated(table, session_id, row, column),
        )
        owner = _b64(session_id.encode("utf-8", "surrogatepass"))
        return f'{PREFIX}{self.current}.{owner}.{_b64(nonce + data)}"'

    def open(self, text: str | None, table: str, session_id: str, row: object, column: str) -> str:
        """The text ``text`` seals at its place; :class:`CorruptRowError` naming the
        place for anything else (a text in clear included)."""

        def corrupt(reason: str, kind: type[CorruptRowError] = CorruptRowError) -> CorruptRowError:
            seq = row if isinstance(row, int) else None
            where = (
                f"{table}.{column}" if seq is not None or not row else f"{table}.{column} of {row}"
            )
            return kind(f"{where}: {reason}", tenant=self.tenant, session_id=session_id, seq=seq)

        if type(text) is not str or not text.startswith(PREFIX) or not text.endswith('"'):
            raise corrupt("not sealed, in an encrypted tenant (nothing falls back to plaintext)")
        parts = text[len(PREFIX) : -1].split(".")
        if len(parts) != 3:
            raise corrupt("a sealed text that is not whole")
        key_id, owner_text, sealed = parts
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            unknown = f"sealed under data key {key_id!r}, which the tenant does not have"
            raise corrupt(unknown, UnknownDataKey)
        try:
            owner = _unb64(owner_text).decode("utf-8", "surrogatepass")
            blob = _unb64(sealed)
        except (binascii.Error, ValueError):
            raise corrupt("a sealed text that is not whole") from None
        if owner != session_id and owner not in self._lineages.get(session_id, ()):
            raise corrupt(f"sealed for a row of session {owner!r}, not of this one (moved here)")
        if len(blob) < _NONCE + _TAG:
            raise corrupt("a truncated ciphertext")
        try:
            plain = cipher.decrypt(  # type: ignore[attr-defined]
                blob[:_NONCE], blob[_NONCE:], self._associated(table, owner, row, column)
            )
        except Exception:  # cryptography's InvalidTag: altered, truncated or moved
            raise corrupt(
                "does not authenticate at its place (altered, truncated or moved)"
            ) from None
        return bytes(plain).decode("utf-8", "surrogatepass")

    def owner_of(self, text: str) -> str | None:
        """The session ``text`` was sealed for (None when it is not a whole sealed text)."""
        if not is_sealed(text):
            return None
        parts = text[len(PREFIX) : -1].split(".")
        if len(parts) != 3:
            return None
        try:
            return _unb64(parts[1]).decode("utf-8", "surrogatepass")
        except (binascii.Error, ValueError):
            return None

    def key_of(self, text: str) -> str | None:
        """The id of the data key that sealed ``text`` (None when it is not sealed)."""
        if not is_sealed(text):
            return None
        return text[len(PREFIX) :].split(".", 1)[0]


class KeyRing:
    """Encryption at rest for a store: ``HistoryStore.open(url, encryption=KeyRing(provider))``.

    It unwraps each tenant's keys through ``provider`` (once per wrapped key: a key
    service is asked again only for a key it has not unwrapped in this process) and makes
    the new keys of a tenant encrypted for the first time."""

    def __init__(self, provider: KeyProvider) -> None:
        if not isinstance(provider, KeyProvider):
            raise EncryptionError(
                f"KeyRing needs a KeyProvider (key_id, wrap, unwrap), got {type(provider).__name__}"
            )
        self.provider = provider
        self._unwrapped: dict[tuple[str, bytes], bytes] = {}

    @property
    def key_id(self) -> str:
        """The id of the provider's key that wraps new data keys."""
        return str(self.provider.key_id)

    async def wrap(self, key: bytes) -> WrappedKey:
        """``key`` wrapped under the provider's current key (purpose and id left to the
        caller: see :meth:`new_key`)."""
        kek_id = self.key_id
        wrapped = await self.provider.wrap(key)
        self._unwrapped[(kek_id, bytes(wrapped))] = key
        return WrappedKey("", "", kek_id, bytes(wrapped))

    async def new_key(self, purpose: str) -> tuple[WrappedKey, bytes]:
        """A new random key for ``purpose``, wrapped, with a new id; and the key."""
        key = new_data_key()
        wrapped = await self.wrap(key)
        key_id = os.urandom(6).hex()
        return WrappedKey(key_id, purpose, wrapped.kek_id, wrapped.wrapped), key

    async def unwrap(self, key: WrappedKey) -> bytes:
        """The key ``key`` wraps; :class:`~store.errors.WrongKey` naming the key ids when
        the provider cannot unwrap it."""
        cached = self._unwrapped.get((key.kek_id, key.wrapped))
        if cached is not None:
            return cached
        try:
            plain = bytes(await self.provider.unwrap(key.wrapped, key.kek_id))
        except WrongKey:
            raise
        except Exception as error:
            raise WrongKey(
                f"the key provider cannot unwrap {key.purpose} key {key.key_id!r}, wrapped under "
                f"key {key.kek_id!r}: is this the tenant's key file? ({type(error).__name__})"
            ) from None
        if len(plain) != KEY_BYTES:
            raise WrongKey(
                f"{key.purpose} key {key.key_id!r} unwraps to {len(plain)} bytes, not 32"
            )
        self._unwrapped[(key.kek_id, key.wrapped)] = plain
        return plain

    async def sealing(self, tenant: str, keys: list[WrappedKey], current: str) -> Sealing:
        """The sealing of ``tenant`` from its stored keys (``current``: the data key that
        seals)."""
        data: dict[str, bytes] = {}
        hash_key: bytes | None = None
        for key in keys:
            plain = await self.unwrap(key)
            if key.purpose == "hash":
                hash_key = plain
            else:
                data[key.key_id] = plain
        if hash_key is None:
            raise EncryptionError(f"tenant {tenant!r} is encrypted, and its hash key is missing")
        return Sealing(tenant, data, current, hash_key)
