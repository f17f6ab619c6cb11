"""Reading a chat service's data export (ChatGPT's, Claude.ai's): its
``conversations.json``, given as the file, as the folder it was unpacked into, or as the
export's ``.zip`` (the member read where it lies, nothing extracted).

``conversations.json`` is one JSON array of every conversation the account holds, and
may be gigabytes: :func:`conversations` streams it one conversation at a time (with
ijson), so that an import holds one conversation and never the file.
"""

from __future__ import annotations

import codecs
import zipfile
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import ijson

from store.errors import InvalidSource
from store.formats.open_webui import is_open_webui_chat
from store.importing.source import decoding_failure, reading
from store.rules.limits import json_depth

__all__ = ["CONVERSATIONS", "conversations", "export_format", "is_export_source"]

CONVERSATIONS = "conversations.json"
"""The export's file of conversations."""

_HEAD = 64
"""Bytes read to find the array's opening bracket."""
_ENVELOPE = 64
"""Levels a conversation nests around its messages' values (see
:data:`~store.importing.source.ENVELOPE_DEPTH`)."""


class _Prefixed:
    """A binary stream that gives ``head`` first, then the rest of ``handle``."""

    def __init__(self, head: bytes, handle: IO[bytes]) -> None:
        self._head = head
        self._handle = handle

    def read(self, size: int = -1) -> bytes:
        if not self._head:
            return self._handle.read(size)
        if size < 0:
            head, self._head = self._head, b""
            return head + self._handle.read()
        head, self._head = self._head[:size], self._head[size:]
        return head


def _member(archive: zipfile.ZipFile, source: str) -> str:
    """The archive's ``conversations.json``: at its top, else the shallowest one."""
    found = [n for n in archive.namelist() if n.rsplit("/", 1)[-1] == CONVERSATIONS]
    if not found:
        raise InvalidSource(source, None, f"the archive holds no {CONVERSATIONS}")
    return min(found, key=lambda name: (name.count("/"), name))


def _file(path: Path) -> Path:
    return path / CONVERSATIONS if path.is_dir() else path


def is_export_source(path: Path) -> bool:
    """Whether ``path`` may hold an export: a zip archive, a folder with
    ``conversations.json``, or a file whose JSON starts with an array."""
    file = _file(path)
    if not file.is_file():
        return False
    if zipfile.is_zipfile(file):
        return True
    with file.open("rb") as handle:
        head = handle.read(_HEAD)
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        text = head[: len(head) // 2 * 2].decode("utf-16", errors="replace")
    else:
        text = head.removeprefix(codecs.BOM_UTF8).decode("utf-8", errors="replace")
    return text.lstrip().startswith("[")


@contextmanager
def _opened(path: Path, source: str) -> Iterator[IO[bytes]]:
    """The bytes of ``conversations.json``, as UTF-8 (another encoding given, or a
    UTF-16 BOM, is decoded as it is read; a UTF-8 BOM is skipped)."""
    file = _file(path)
    if zipfile.is_zipfile(file):
        with zipfile.ZipFile(file) as archive, archive.open(_member(archive, source)) as member:
            yield _utf8(member, None)
        return
    with file.open("rb") as handle:
        yield _utf8(handle, reading().encoding)


def _utf8(handle: IO[bytes], given: str | None) -> IO[bytes]:
    head = handle.read(4)
    encoding = given
    if encoding is None:
        if head.startswith(codecs.BOM_UTF8):
            return _Prefixed(head[3:], handle)  # type: ignore[return-value]
        if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
            encoding = "utf-16"
    rest = _Prefixed(head, handle)
    if encoding is None or codecs.lookup(encoding).name == "utf-8":
        return rest  # type: ignore[return-value]
    return codecs.EncodedFile(rest, "utf-8", encoding)  # type: ignore[arg-type]


def _reason(error: Exception) -> str:
    """The parser's first line (without the excerpt it draws under it)."""
    text = str(error)
    if text.startswith(("b'", 'b"')):  # the C parser's message as the repr of bytes
        text = text[2:]
    lines = text.strip().splitlines()
    first = lines[0].rstrip(". ") if lines else "it does not parse"
    reason = f"not JSON: {first}"
    if "premature EOF" in first:
        reason += "; the file ends before its JSON does (cut off?)"
    return reason


def _checked(source: str, where: str, value: Any) -> Any:
    bound = reading().limits.max_json_depth + _ENVELOPE
    if json_depth(value, bound) > bound:
        raise InvalidSource(source, where, f"JSON nested deeper than {bound} levels")
    return value


def conversations(path: Path, source: str) -> Generator[tuple[int, Any]]:
    """``(number, value)`` of each element of the export's array of conversations,
    numbered from 1, streamed; a file that is not such an array, or breaks off, is an
    :class:`InvalidSource` naming the conversation where it goes wrong."""
    number = 0
    try:
        with _opened(path, source) as handle:
            head = handle.read(_HEAD)
            if not head.lstrip().startswith(b"["):
                raise InvalidSource(source, None, "expected a JSON array of conversations")
            stream = _Prefixed(head, handle)
            for value in ijson.items(stream, "item", use_float=True):
                number += 1
                yield number, _checked(source, f"conversation {number}", value)
    except ijson.JSONError as error:
        if "UTF8" in str(error) and _file(path).is_file() and not zipfile.is_zipfile(path):
            raise decoding_failure(_file(path), source) from None
        raise InvalidSource(source, f"conversation {number + 1}", _reason(error)) from None
    except UnicodeDecodeError:
        raise decoding_failure(_file(path), source) from None
    except zipfile.BadZipFile as error:
        raise InvalidSource(source, None, f"a damaged zip archive ({error})") from None


def export_format(path: Path, source: str) -> str | None:
    """``chatgpt``, ``claude-ai`` or ``open-webui`` when ``path`` is such an export (told
    by its first conversation: a ``mapping`` is ChatGPT's tree, ``chat_messages``
    Claude.ai's list, ``chat.history.messages`` Open WebUI's tree), else None."""
    if not is_export_source(path):
        return None
    reading_it = conversations(path, source)
    try:
        first = next(reading_it, None)
    except InvalidSource:
        return None
    finally:
        reading_it.close()
    value = first[1] if first is not None else None
    if isinstance(value, dict) and isinstance(value.get("mapping"), dict):
        return "chatgpt"
    if isinstance(value, dict) and isinstance(value.get("chat_messages"), list):
        return "claude-ai"
    if is_open_webui_chat(value):
        return "open-webui"
    return None
