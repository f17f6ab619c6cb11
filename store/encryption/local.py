"""A key-encryption key kept in a local key file: :class:`LocalKeyProvider`, the
:class:`~store.encryption.provider.KeyProvider` that ships, and :func:`new_key_file`,
which makes a key file or adds a key to one.

A key file is a small JSON document (``docs/encryption.md``, "Key files and
providers")::

    {
      "format": "chatledger-key-file",
      "version": 1,
      "current": "lk-20261206-3f9c2a1be07d4c55",
      "keys": {
        "lk-20261206-3f9c2a1be07d4c55": "<base64 of 32 random bytes>"
      }
    }

``current`` names the key :meth:`LocalKeyProvider.wrap` uses; every key ever made stays
in ``keys``, so that data keys wrapped under an older one still unwrap after a rotation
of the KEK (``chatledger keys new PATH --add``, then ``chatledger keys rotate --kek``).

A wrapped data key is ``0x01 || nonce (12 bytes) || AES-256-GCM ciphertext and tag``,
its associated data the format's name, the wrap version and the KEK's id: a wrapped key
unwraps only under the key id it was stored with, whatever bytes another id holds.

A key file is refused, in one line, when it cannot be read, is not such a document,
holds a key that is not 32 bytes, or (on POSIX) may be read or written by the group or
others: as ssh refuses such a private key.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import secrets
import stat
import tempfile
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from store.errors import InvalidInput, InvalidKey, WrongKey

try:
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
except ImportError:  # pragma: no cover - the extra is installed for the tests
    raise ImportError(
        "store.encryption.local needs the cryptography package: "
        "pip install 'chatledger[encryption]'"
    ) from None

__all__ = ["KEY_FILE_FORMAT", "KEY_FILE_VERSION", "LocalKeyProvider", "new_key_file"]

KEY_FILE_FORMAT = "chatledger-key-file"
"""The ``format`` field of every key file."""

KEY_FILE_VERSION = 1
"""The ``version`` field of the key files this module reads and writes."""

KEY_BYTES = 32
"""Each key's length: an AES-256 key."""

_WRAP_VERSION = 1
_NONCE_BYTES = 12
_TAG_BYTES = 16
_MODE_OPEN_TO_OTHERS = stat.S_IRWXG | stat.S_IRWXO


class LocalKeyProvider:
    """Wraps data keys under AES-256-GCM keys held in memory, read from a key file
    (:meth:`from_file`), from an environment variable holding a key file's text
    (:meth:`from_env`), or given as bytes.

    ``keys`` maps each key id to its 32 bytes; ``current`` names the one :meth:`wrap`
    uses. Older keys stay so that :meth:`unwrap` still opens what they wrapped.
    """

    def __init__(self, keys: Mapping[str, bytes], *, current: str) -> None:
        for key_id, key in keys.items():
            if not key_id or not isinstance(key_id, str):
                raise InvalidKey(f"key id {key_id!r}: expected a non-empty string")
            if len(key) != KEY_BYTES:
                raise InvalidKey(f"key {key_id!r} is {len(key)} bytes, not {KEY_BYTES}")
        if current not in keys:
            raise InvalidKey(f"the current key {current!r} is not among the keys")
        self._keys = {key_id: AESGCM(bytes(key)) for key_id, key in keys.items()}
        self._current = current

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> LocalKeyProvider:
        """The keys of the key file at ``path``: refused (:class:`~store.errors.InvalidKey`)
        when it cannot be read, is malformed, or is open to the group or others."""
        text = _read_private(Path(path))
        keys, current = _parse(text, source=str(path))
        return cls(keys, current=current)

    @classmethod
    def from_env(cls, name: str) -> LocalKeyProvider:
        """The keys of the key file whose whole text the environment variable ``name``
        holds (for a secret manager that hands a process its secrets as variables; the
        permissions of a file do not apply)."""
        text = os.environ.get(name, "")
        if not text.strip():
            raise InvalidKey(f"${name} is not set: expected a key file's text in it")
        keys, current = _parse(text, source=f"${name}")
        return cls(keys, current=current)

    @property
    def key_id(self) -> str:
        """The id of the key :meth:`wrap` wraps under."""
        return self._current

    @property
    def key_ids(self) -> tuple[str, ...]:
        """Every key id held, the current one included."""
        return tuple(self._keys)

    async def wrap(self, data_key: bytes) -> bytes:
        """``data_key`` sealed under the current key, bound to its id."""
        nonce = secrets.token_bytes(_NONCE_BYTES)
        sealed = self._keys[self._current].encrypt(nonce, data_key, _bound(self._current))
        return bytes([_WRAP_VERSION]) + nonce + sealed

    async def unwrap(self, wrapped: bytes, key_id: str) -> bytes:
        """The data key ``wrapped`` holds: :class:`~store.errors.WrongKey`, naming
        ``key_id``, when that key is not held or the wrapped key does not open under it
        (another key, or damaged bytes)."""
        aead = self._keys.get(key_id)
        if aead is None:
            raise WrongKey(f"the key file holds no key {key_id!r} (it holds {self._listed()})")
        if len(wrapped) < 1 + _NONCE_BYTES + _TAG_BYTES or wrapped[0] != _WRAP_VERSION:
            raise WrongKey(f"the wrapped data key under key {key_id!r} is damaged")
        nonce, sealed = wrapped[1 : 1 + _NONCE_BYTES], wrapped[1 + _NONCE_BYTES :]
        try:
            return aead.decrypt(nonce, sealed, _bound(key_id))
        except InvalidTag:
            raise WrongKey(
                f"key {key_id!r} does not open the wrapped data key (another key file "
                "with the same id, or damaged bytes)"
            ) from None

    def _listed(self) -> str:
        return ", ".join(repr(key_id) for key_id in self._keys)


def new_key_file(path: str | os.PathLike[str], *, add: bool = False) -> str:
    """Write a key file with one new random key at ``path`` (mode 0600, whole or not at
    all) and return the key's id.

    An existing file is refused (:class:`~store.errors.InvalidInput`) unless ``add``:
    then the new key is added to the file's keys and made current, the older ones kept
    (a missing file is refused too: there is nothing to add to). Two processes adding
    to one file at once may lose one key: rotate from one place.
    """
    target = Path(path)
    key_id = _new_key_id()
    key = secrets.token_bytes(KEY_BYTES)
    if not add:
        _write_private(target, _dump({key_id: key}, current=key_id), replace=False)
        return key_id
    if not target.exists():
        raise InvalidInput(f"{target}: no key file to add a key to (leave out --add to make one)")
    keys, _ = _parse(_read_private(target), source=str(target))
    _write_private(target, _dump({**keys, key_id: key}, current=key_id), replace=True)
    return key_id


def _new_key_id() -> str:
    """``lk-YYYYMMDD-`` and 16 random hex digits: unique, and sorted by when made."""
    return f"lk-{datetime.now(UTC):%Y%m%d}-{secrets.token_hex(8)}"


def _bound(key_id: str) -> bytes:
    """The associated data of a wrapped key: the format, the wrap version, the KEK id."""
    return f"{KEY_FILE_FORMAT}\x00wrap-v{_WRAP_VERSION}\x00{key_id}".encode()


def _read_private(path: Path) -> str:
    """The text of the key file at ``path``, refused when others may read or write it."""
    try:
        with path.open("rb") as file:
            mode = os.fstat(file.fileno()).st_mode
            data = file.read()
    except OSError as error:
        raise InvalidKey(f"cannot read key file {path}: {error.strerror or error}") from None
    if os.name == "posix" and mode & _MODE_OPEN_TO_OTHERS:
        raise InvalidKey(
            f"key file {path} is open to the group or others (mode {stat.S_IMODE(mode):04o}): "
            f"refused as ssh refuses such a private key; run chmod 600 {path}"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidKey(f"key file {path} is not UTF-8 text") from None


def _parse(text: str, *, source: str) -> tuple[dict[str, bytes], str]:
    """The keys and the current key id of a key file's text (``source`` names it in
    errors)."""
    try:
        document = json.loads(text)
    except ValueError as error:
        raise InvalidKey(f"{source}: not a key file (invalid JSON: {error})") from None
    if not isinstance(document, dict) or document.get("format") != KEY_FILE_FORMAT:
        raise InvalidKey(f'{source}: not a key file (no "format": "{KEY_FILE_FORMAT}")')
    if document.get("version") != KEY_FILE_VERSION:
        raise InvalidKey(
            f"{source}: key file version {document.get('version')!r}, "
            f"this chatledger reads version {KEY_FILE_VERSION}"
        )
    current, listed = document.get("current"), document.get("keys")
    if not isinstance(listed, dict) or not listed:
        raise InvalidKey(f'{source}: "keys" must map key ids to base64 keys')
    if not isinstance(current, str) or current not in listed:
        raise InvalidKey(f'{source}: "current" must name one of the keys, not {current!r}')
    return {key_id: _key(value, key_id, source) for key_id, value in listed.items()}, current


def _key(value: object, key_id: str, source: str) -> bytes:
    if not isinstance(value, str):
        raise InvalidKey(f"{source}: key {key_id!r} is not a base64 string")
    try:
        key = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidKey(f"{source}: key {key_id!r} is not valid base64") from None
    if len(key) != KEY_BYTES:
        raise InvalidKey(f"{source}: key {key_id!r} is {len(key)} bytes, not {KEY_BYTES}")
    return key


def _dump(keys: Mapping[str, bytes], *, current: str) -> str:
    document = {
        "format": KEY_FILE_FORMAT,
        "version": KEY_FILE_VERSION,
        "current": current,
        "keys": {key_id: base64.b64encode(key).decode("ascii") for key_id, key in keys.items()},
    }
    return json.dumps(document, indent=2) + "\n"


def _write_private(path: Path, text: str, *, replace: bool) -> None:
    """Write ``text`` to ``path`` with mode 0600 through a temporary file in the same
    folder, so that a reader sees the old file or the new one, never a part. Without
    ``replace`` an existing file is refused, also one made meanwhile (a hard link, which
    never overwrites)."""
    folder = path.parent
    try:
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as error:
        raise InvalidInput(f"cannot write a key file in {folder}: {error.strerror}") from None
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            os.chmod(temporary, 0o600)
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        _place(Path(temporary), path, replace=replace)
    finally:
        Path(temporary).unlink(missing_ok=True)
    _sync_folder(folder)


def _place(temporary: Path, path: Path, *, replace: bool) -> None:
    try:
        if replace:
            os.replace(temporary, path)
        else:
            os.link(temporary, path)
    except FileExistsError:
        raise InvalidInput(
            f"{path}: a file exists already (add a key to a key file with --add)"
        ) from None
    except OSError as error:
        raise InvalidInput(f"cannot write key file {path}: {error.strerror}") from None


def _sync_folder(folder: Path) -> None:
    """Make the rename durable (POSIX; elsewhere a folder cannot be opened)."""
    if os.name != "posix":
        return
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
