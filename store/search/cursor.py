"""Signed, opaque page cursors: :func:`encode_cursor`, :func:`decode_cursor`.

A cursor is ``BODY.TAG``, both URL-safe base64 without padding: ``BODY`` is the payload
as compact JSON (sorted keys), ``TAG`` the first 16 bytes of its HMAC-SHA256 under the
key, computed over a fixed context string and the body (so a signature made for
anything else never passes as a cursor's). The payload is whatever the caller needs to
resume (the query, the last position): readable by whoever holds the cursor, but not
editable without the key. A cursor that is malformed, too long, edited, or signed with
another key is :class:`~store.errors.InvalidInput`, in one line.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Final

from pydantic import JsonValue

from store.errors import InvalidInput

__all__ = ["MAX_CURSOR_CHARS", "decode_cursor", "encode_cursor"]

MAX_CURSOR_CHARS: Final = 8192
"""The longest cursor accepted (and issued)."""
_CONTEXT: Final = b"chatledger search cursor v1\x00"
_TAG_BYTES: Final = 16
_MIN_KEY_BYTES: Final = 16


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if _b64(raw) != text:
        raise ValueError("not canonical base64")
    return raw


def _tag(key: bytes, body: bytes) -> bytes:
    if not isinstance(key, bytes) or len(key) < _MIN_KEY_BYTES:
        raise ValueError(f"the cursor key must be bytes, at least {_MIN_KEY_BYTES} of them")
    return hmac.new(key, _CONTEXT + body, hashlib.sha256).digest()[:_TAG_BYTES]


def encode_cursor(key: bytes, payload: Mapping[str, JsonValue]) -> str:
    """The cursor carrying ``payload`` (a JSON object, no NaN nor infinity), signed with
    ``key`` (at least 16 bytes)."""
    body = json.dumps(payload, separators=(",", ":"), sort_keys=True, allow_nan=False)
    raw = body.encode()
    cursor = f"{_b64(raw)}.{_b64(_tag(key, raw))}"
    if len(cursor) > MAX_CURSOR_CHARS:
        raise ValueError(f"cursor payload too large ({len(cursor)} > {MAX_CURSOR_CHARS})")
    return cursor


def _invalid(reason: str) -> InvalidInput:
    return InvalidInput(f"invalid cursor: {reason}")


def _parts(cursor: object) -> tuple[bytes, bytes]:
    if not isinstance(cursor, str) or len(cursor) > MAX_CURSOR_CHARS:
        raise _invalid("not one a previous page returned")
    body, dot, tag = cursor.partition(".")
    if not dot:
        raise _invalid("not one a previous page returned")
    try:
        return _unb64(body), _unb64(tag)
    except (binascii.Error, ValueError):
        raise _invalid("not one a previous page returned") from None


def decode_cursor(key: bytes, cursor: str) -> dict[str, JsonValue]:
    """The payload of ``cursor``, after checking its signature under ``key``.

    Raises:
        InvalidInput: the cursor is malformed, too long, edited, or signed with another key.
    """
    body, tag = _parts(cursor)
    if not hmac.compare_digest(tag, _tag(key, body)):
        raise _invalid("signature mismatch (edited, or issued by another database)")
    try:
        payload = json.loads(body)
    except (UnicodeDecodeError, ValueError):
        raise _invalid("unreadable payload") from None
    if not isinstance(payload, dict):
        raise _invalid("unreadable payload")
    return payload
