"""Paging a record set through signed, opaque cursors: :func:`paginate`, :class:`Page`.

A cursor is what a tool hands the model to ask for the next page. It is URL-safe base64
(no padding) of 37 bytes:

* a format version (1 byte) and the offset of the next page (4 bytes, big-endian);
* the first 16 bytes of the SHA-256 of the record set: the compact JSON of each record
  (:func:`~strategies.bounded.serialization.compact_dumps`), each preceded by its
  length, in order;
* the first 16 bytes of the HMAC-SHA256 of the above, under the key.

So a cursor cannot be forged or edited without the key (:class:`InvalidCursor`), and a
cursor issued for other records (another query, or the same query once the data
changed) is found stale instead of silently skipping or repeating records. The default
key is drawn at random when the process starts: such cursors are valid until the process
ends. Pass ``key=`` (the same bytes in every process) for cursors that survive restarts
and work across processes; they stay valid as long as the record set is the same.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import struct
from collections.abc import Sequence
from typing import Final, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from strategies.bounded.results import check_int
from strategies.bounded.serialization import compact_dumps
from strategies.errors import ChatledgerError

__all__ = ["InvalidCursor", "Page", "paginate"]

T = TypeVar("T")

_VERSION: Final = 1
_HEAD: Final = struct.Struct(">BI")
_DIGEST_BYTES: Final = 16
_TAG_BYTES: Final = 16
_CURSOR_BYTES: Final = _HEAD.size + _DIGEST_BYTES + _TAG_BYTES
_MIN_KEY_BYTES: Final = 16
_PROCESS_KEY: Final = secrets.token_bytes(32)
"""The default key: cursors signed with it end with the process."""


class InvalidCursor(ChatledgerError, ValueError):
    """A cursor that is malformed, forged, tampered with, or stale (the records changed)."""


class Page(BaseModel, Generic[T]):
    """One page of records, and how to ask for the next one."""

    model_config = ConfigDict(frozen=True)

    items: list[T]
    """The records of this page, in order."""
    has_more: bool
    """Whether records follow this page."""
    next_cursor: str | None = None
    """The cursor of the next page (pass it back to :func:`paginate`), None on the last."""


def _digest(records: Sequence[object]) -> bytes:
    hasher = hashlib.sha256()
    for record in records:
        data = compact_dumps(record).encode()
        hasher.update(len(data).to_bytes(8, "big"))
        hasher.update(data)
    return hasher.digest()[:_DIGEST_BYTES]


def _tag(key: bytes, body: bytes) -> bytes:
    return hmac.new(key, body, hashlib.sha256).digest()[:_TAG_BYTES]


def _text(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _encode(offset: int, digest: bytes, key: bytes) -> str:
    body = _HEAD.pack(_VERSION, offset) + digest
    return _text(body + _tag(key, body))


def _decode(cursor: str, digest: bytes, key: bytes, size: int) -> int:
    """The offset ``cursor`` points at, after checking its signature and its records."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    except (binascii.Error, ValueError, TypeError):
        raise InvalidCursor("malformed cursor: not the one a previous page returned") from None
    if len(raw) != _CURSOR_BYTES or _text(raw) != cursor:
        raise InvalidCursor("malformed cursor: not the one a previous page returned")
    body, tag = raw[:-_TAG_BYTES], raw[-_TAG_BYTES:]
    if not hmac.compare_digest(tag, _tag(key, body)):
        raise InvalidCursor(
            "cursor signature mismatch: forged, edited, or signed with another key "
            "(cursors signed with the default key end with the process)"
        )
    version, offset = _HEAD.unpack(body[: _HEAD.size])
    if version != _VERSION:
        raise InvalidCursor(f"cursor of an unknown format (version {version})")
    if not hmac.compare_digest(body[_HEAD.size :], digest) or offset > size:
        raise InvalidCursor("stale cursor: the records changed since it was issued; start over")
    return int(offset)


def _key(key: bytes | None) -> bytes:
    if key is None:
        return _PROCESS_KEY
    if not isinstance(key, bytes):
        raise TypeError(f"key must be bytes, not {type(key).__name__}")
    if len(key) < _MIN_KEY_BYTES:
        raise ValueError(f"key must have {_MIN_KEY_BYTES} bytes or more, got {len(key)}")
    return key


def paginate(
    records: Sequence[T],
    *,
    page_size: int,
    cursor: str | None = None,
    key: bytes | None = None,
) -> Page[T]:
    """The page of ``records`` that ``cursor`` points at (the first page without one).

    ``records`` must be the same, in the same order, for every page: the cursor carries
    a digest of them (see the module docstring). Each record needs a JSON form
    (:mod:`~strategies.bounded.serialization`).

    Raises:
        InvalidCursor: the cursor is malformed, forged, tampered with, signed with
            another key, or stale (the records are not those it was issued for).
    """
    size = check_int(page_size, "page_size")
    secret = _key(key)
    if len(records) > 0xFFFFFFFF:
        raise ValueError("paginate pages at most 4294967295 records")
    digest = _digest(records)
    start = 0 if cursor is None else _decode(cursor, digest, secret, len(records))
    end = min(start + size, len(records))
    has_more = end < len(records)
    return Page(
        items=list(records[start:end]),
        has_more=has_more,
        next_cursor=_encode(end, digest, secret) if has_more else None,
    )
