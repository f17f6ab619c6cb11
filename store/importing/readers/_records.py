"""Records of a file: the lines of JSONL, or the elements of a JSON document."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from store.errors import InvalidSource
from store.importing.source import iter_lines, load_document, parse_line

__all__ = ["is_document", "records"]


_JSONL_SUFFIXES = frozenset({".jsonl", ".ndjson"})
_SNIFF = 4096
"""Bytes read to tell a document from JSONL by its first line."""


def is_document(path: Path) -> bool:
    """Whether ``path`` is read as one JSON document rather than as JSONL: a ``.json``
    file is, a ``.jsonl`` or ``.ndjson`` file is not, and a file of another name is when
    its first line opens a JSON array or object and holds nothing else (as an indented
    document's does: ``export --format agent-framework -o chat.out``, say)."""
    suffix = path.suffix.lower()
    if suffix == ".json" or suffix in _JSONL_SUFFIXES:
        return suffix == ".json"
    try:
        with path.open("rb") as file:
            head = file.read(_SNIFF)
    except OSError:
        return False  # the reader reports what is wrong with the file
    first = head.removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n").split(b"\n", 1)[0]
    return first.strip() in (b"[", b"{")


def records(path: Path, source: str) -> Iterator[tuple[str, Any]]:
    """``(where, value)`` for each line of a JSONL file, streamed, or once for a
    ``.json`` document, read whole (``where`` is ``document``). A line that is not JSON
    comes as its :class:`InvalidSource` (the caller decides); a document that is not
    JSON, or a file that is not text, raises it."""
    if is_document(path):
        yield "document", load_document(path, source)
        return
    for number, line in iter_lines(path, source):
        try:
            yield f"line {number}", parse_line(source, number, line)
        except InvalidSource as error:
            yield f"line {number}", error
