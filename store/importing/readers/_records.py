"""Records of a file: the lines of JSONL, or the elements of a JSON document."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from store.errors import InvalidSource
from store.importing.source import iter_lines, load_document, parse_line

__all__ = ["is_document", "records"]


def is_document(path: Path) -> bool:
    """Whether ``path`` is read as one JSON document (``.json``) rather than as JSONL."""
    return path.suffix.lower() == ".json"


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
