"""Records of a file: the lines of JSONL, or the elements of a JSON document."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from store.errors import InvalidSource
from store.importing.source import JSON_LINES, iter_lines, load_document_or_lines, parse_line

__all__ = ["is_document", "records"]


_SNIFF = 4096
"""Bytes read to tell a document from JSONL by its first line."""


def is_document(path: Path) -> bool:
    """Whether ``path`` is read as one JSON document rather than as JSONL: a ``.json``
    file is (unless it turns out to hold JSONL: :func:`records`), and a file of any name
    is when its first line opens a JSON array or object and holds nothing else, as an
    indented document's does and no JSONL line can (``export --format agent-framework
    -o chat.out``, say)."""
    if path.suffix.lower() == ".json":
        return True
    try:
        with path.open("rb") as file:
            head = file.read(_SNIFF)
    except OSError:
        return False  # the reader reports what is wrong with the file
    first = head.removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n").split(b"\n", 1)[0]
    return first.strip() in (b"[", b"{")


def records(path: Path, source: str) -> Iterator[tuple[str, Any]]:
    """``(where, value)`` for each line of a JSONL file, streamed, or once for a
    ``.json`` document, read whole (``where`` is ``document``); a ``.json`` file that
    holds JSONL is read as JSONL. A line that is not JSON
    comes as its :class:`InvalidSource` (the caller decides); a document that is not
    JSON, or a file that is not text, raises it."""
    if is_document(path):
        document = load_document_or_lines(path, source)
        if document is not JSON_LINES:
            yield "document", document
            return
    for number, line in iter_lines(path, source):
        try:
            yield f"line {number}", parse_line(source, number, line)
        except InvalidSource as error:
            yield f"line {number}", error
