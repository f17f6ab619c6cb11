"""Content identity: a message's canonical hash, and the dedupe decision of an append.

The content hash is SHA-256 of the message's canonical text, which
:mod:`store.rules.storage_json` writes (``json.dumps(..., sort_keys=True,
separators=(",", ":"))`` of the message's JSON-mode dump, timestamps normalized to UTC):
stored hashes depend on these exact bytes (they tell a replay from an id reused with
other content). Hashing writes the ``contents`` column's text on the way, where it can.

An append stores a message whose id is new; a message whose id is stored with the same
content hash is a replay and is skipped; an id reused with other content (in the batch,
or against the session) is refused (:func:`dedupe`). Every backend decides the same way.

A redacted row keeps no hash of what it held: its hash is :data:`REDACTED_HASH`, which
no content gives, so that nothing in the row lets its text be found by hashing guesses
(the id, role and time stay in the row; a short answer hashed with them is found in a
moment). Any message appended under a redacted id is a replay (:func:`is_replay`): the id
alone identifies it, and the tombstone stays.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass

from store.errors import InvalidInput
from store.rules.storage_json import canonical_and_contents
from strategies.messages import Message

__all__ = [
    "REDACTED_HASH",
    "REDACTION_KEY",
    "Deduped",
    "content_hash",
    "dedupe",
    "digest_bytes",
    "hashed_contents",
    "hashing_of",
    "is_replay",
    "is_tombstone",
    "keyed_hashing",
    "new_messages",
    "stored_hash",
]

REDACTION_KEY = "chatledger_redaction"
"""The metadata key of a redaction's tombstone (:mod:`store.rules.erasure`):
``{"reason": ..., "event_id": ...}``. A tombstone is content of its own: importing the
redacted message again is a replay, never a change (see :func:`dedupe`)."""


REDACTED_HASH = "redacted"
"""The content hash of a redacted row: not a hash of anything (a SHA-256 is hex), so
it matches no content and tells nothing of what the row held."""


def is_replay(stored: str, digest: str) -> bool:
    """Whether a message of content hash ``digest`` under an id stored with hash
    ``stored`` is a replay: the same content, or any content of a redacted id."""
    return stored in (digest, REDACTED_HASH)


def stored_hash(message: Message) -> str:
    """The hash a row holding ``message`` keeps: :data:`REDACTED_HASH` for a tombstone,
    else :func:`content_hash`."""
    return REDACTED_HASH if is_tombstone(message) else content_hash(message)


def is_tombstone(message: Message) -> bool:
    """Whether ``message`` is a redaction's tombstone."""
    return REDACTION_KEY in message.metadata and len(message.metadata) == 1


def hashed_contents(message: Message) -> tuple[str, str | None]:
    """:func:`content_hash` of ``message``, and its ``contents`` column's text
    (:func:`~store.rules.storage_json.contents_json`) when it was written on the way
    (plain ASCII text, the usual case), else None: one pass over the message's strings."""
    canonical, contents = canonical_and_contents(message)
    return _sha256(canonical), contents


_HASH_SLICE = 1 << 20
"""Characters of a long part of the canonical text encoded at a time for the hash."""


_HASH_KEY: ContextVar[bytes | None] = ContextVar("chatledger_hash_key", default=None)
"""The key of the running call's content hashes (an encrypted tenant's hash key)."""


@contextmanager
def keyed_hashing(key: bytes | None) -> Iterator[None]:
    """Hash contents with HMAC-SHA256 under ``key`` (None: plain SHA-256) within the
    block: an encrypted tenant's stored hashes confirm no guess of a text
    (:mod:`store.encryption.sealing`)."""
    token = _HASH_KEY.set(key)
    try:
        yield
    finally:
        _HASH_KEY.reset(token)


def hashing_of(store: object) -> AbstractContextManager[None]:
    """The content hashing of ``store``'s tenant, for what is hashed before a call
    reaches the store (ids an importer or an adapter derives from a text): keyed where
    the store keys its hashes (an encrypted tenant's ``content_hashing()``), plain
    elsewhere."""
    hashing = getattr(store, "content_hashing", None)
    return hashing() if callable(hashing) else nullcontext()


def digest_bytes(data: bytes) -> bytes:
    """SHA-256 of ``data``, keyed as :func:`content_hash` is (:func:`keyed_hashing`): for
    the other digests a store keeps of contents (the usage ledger's context chain)."""
    key = _HASH_KEY.get()
    if key is None:
        return hashlib.sha256(data).digest()
    return hmac.new(key, data, hashlib.sha256).digest()


def _sha256(parts: list[str]) -> str:
    """SHA-256 of the concatenation of ``parts`` (HMAC-SHA256 under the key of
    :func:`keyed_hashing`), without writing the whole text: a long part (a tool result)
    is encoded a slice at a time."""
    key = _HASH_KEY.get()
    if key is not None:
        keyed = hmac.new(key, digestmod=hashlib.sha256)
        for part in parts:
            for start in range(0, len(part), _HASH_SLICE):
                keyed.update(part[start : start + _HASH_SLICE].encode())
        return keyed.hexdigest()
    if max(map(len, parts)) <= _HASH_SLICE:
        return hashlib.sha256("".join(parts).encode()).hexdigest()
    digest = hashlib.sha256()
    for part in parts:
        for start in range(0, len(part), _HASH_SLICE):
            digest.update(part[start : start + _HASH_SLICE].encode())
    return digest.hexdigest()


def content_hash(message: Message) -> str:
    """SHA-256 of the message's canonical text
    (:func:`~store.rules.storage_json.canonical_json`): the stored hashes depend on its
    exact bytes."""
    return hashed_contents(message)[0]


def new_messages(messages: Sequence[Message], stored: Mapping[str, str]) -> list[Message]:
    """The first message of each id not in ``stored``: what the append stores, unless
    :func:`dedupe` refuses the batch."""
    seen: set[str] = set()
    fresh: list[Message] = []
    for message in messages:
        message_id = message.message_id
        if message_id not in seen:
            seen.add(message_id)
            if message_id not in stored:
                fresh.append(message)
    return fresh


@dataclass(slots=True)
class Deduped:
    """The content hash of each message of an append, with what hashing them wrote."""

    hashes: dict[str, str]
    """Content hash by message id."""
    contents: dict[str, str]
    """The ``contents`` column's JSON text, by id, where hashing wrote it."""


def dedupe(session_id: str, messages: Sequence[Message], stored: Mapping[str, str]) -> Deduped:
    """Hash each message once (the hash is stored with the row), and check the ids.

    Raises :class:`~store.errors.InvalidInput` for an id reused with other content, in
    the batch or against ``stored`` (the session's hashes of the batch's ids); a
    message stored with the same content is a replay, which :func:`new_messages` leaves
    out, and so is a redaction's tombstone of a stored id (it never overwrites).
    """
    hashes: dict[str, str] = {}
    contents: dict[str, str] = {}
    for message in messages:
        message_id = message.message_id
        digest, text = hashed_contents(message)
        if is_tombstone(message):
            digest = REDACTED_HASH
        known = hashes.get(message_id)
        if known is None:
            hashes[message_id] = digest
            if text is not None:
                contents[message_id] = text
            known = stored.get(message_id)
            if known is not None and not is_replay(known, digest) and not is_tombstone(message):
                raise InvalidInput(
                    f"message id {message_id!r} is already stored in session "
                    f"{session_id!r} with different content"
                )
        elif known != digest:
            raise InvalidInput(
                f"message id {message_id!r} appears twice in the batch with different content"
            )
    return Deduped(hashes, contents)
