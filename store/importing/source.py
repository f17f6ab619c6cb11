"""What the readers hand the importer: conversations of converted messages, with where
each came from; and the text of a file, decoded strictly."""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from store.errors import InvalidSource
from store.formats import FormatError
from strategies.messages import Message

__all__ = [
    "Conversation",
    "Located",
    "format_failure",
    "iter_lines",
    "load_document",
    "parse_line",
    "read_text",
    "source_path",
]


_SQLITE_URL = re.compile(r"^sqlite(\+\w+)?://(?P<path>/.*)$")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def source_path(source: str | Path) -> Path:
    """Where a source is: a path as given, or the file of a SQLite database URL
    (``sqlite:///relative.db``, ``sqlite:////absolute.db``, any ``sqlite+driver``).
    A URL of another database is refused: :class:`~store.errors.InvalidSource`."""
    if isinstance(source, Path):
        return source
    if found := _SQLITE_URL.match(source):
        path = found["path"][1:]  # the third slash ends the (empty) host
        if not path:
            raise InvalidSource(source, None, "the URL names no database file")
        return Path(path)
    if _URL.match(source):
        raise InvalidSource(
            source,
            None,
            "only SQLite database URLs (sqlite:///PATH) and files are read; "
            "copy the tables of another database into a SQLite file first",
        )
    return Path(source)


@dataclass(frozen=True, slots=True)
class Located:
    """One converted message and where it is in its source (``line 3``, ``row 12``)."""

    message: Message
    where: str


@dataclass(slots=True)
class Conversation:
    """One session of a source, or one run of it (a JSONL session spans many lines)."""

    source: str
    """The file or database, as the user named it."""
    where: str
    """Where the conversation starts (``line 3``): with the path, what identifies a
    conversation that has no id of its own."""
    source_session: str | None
    """The source's own session id, when it has one."""
    messages: list[Located] = field(default_factory=list)
    compacted: bool = False
    """Whether its messages carry another system's compaction (imported with
    ``import_messages``, whole)."""
    stored_ids: bool = False
    """Whether the message ids are chatledger's own already (kept as they are)."""
    error: InvalidSource | None = None
    """Why the conversation cannot be read (its messages are then empty)."""


_BOMS = ((codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


def _encoding(path: Path) -> str:
    with path.open("rb") as handle:
        head = handle.read(4)
    if head.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    for bom, name in _BOMS:
        if head.startswith(bom):
            return name
    return "utf-8"


def iter_lines(path: Path, source: str) -> Iterator[tuple[int, str]]:
    """The file's non-blank lines with their 1-based numbers, read as they stream.

    UTF-8 (a BOM allowed), or UTF-16 with a BOM; anything else is an
    :class:`InvalidSource` naming the line.
    """
    number = 0
    try:
        with path.open(encoding=_encoding(path), errors="strict", newline=None) as handle:
            for number, line in enumerate(handle, start=1):
                if line.strip():
                    yield number, line
    except UnicodeDecodeError:
        raise InvalidSource(source, f"line {number + 1}", "not UTF-8 text") from None


def read_text(path: Path, source: str) -> str:
    """The whole file as text (UTF-8, or UTF-16 with a BOM)."""
    try:
        return path.read_text(encoding=_encoding(path), errors="strict")
    except UnicodeDecodeError as error:
        line = path.read_bytes()[: error.start].count(b"\n") + 1
        raise InvalidSource(source, f"line {line}", "not UTF-8 text") from None


def parse_line(source: str, number: int, line: str) -> Any:
    """One JSONL line's value; a truncated or broken line is an :class:`InvalidSource`."""
    try:
        return json.loads(line)
    except json.JSONDecodeError as error:
        raise InvalidSource(source, f"line {number}", f"not JSON ({error.msg})") from None


def load_document(path: Path, source: str) -> Any:
    """A whole JSON document (read whole: such formats cannot stream)."""
    text = read_text(path, source)
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise InvalidSource(source, f"line {error.lineno}", f"not JSON ({error.msg})") from None


def format_failure(source: str, where: str, error: FormatError) -> InvalidSource:
    """A converter's error, placed in the source (``line 3 message 2``)."""
    return InvalidSource(source, f"{where} message {error.index + 1}", error.problem)
