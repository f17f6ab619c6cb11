"""What the readers hand the importer: conversations of converted messages, with where
each came from; how an import reads its sources (:class:`Reading`); and the text of a
file, decoded strictly, with what to do when it does not decode or parse."""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from store.errors import InvalidSource
from store.formats import FormatError
from store.rules.limits import DEFAULT_LIMITS, Limits, json_depth
from strategies.messages import Message

__all__ = [
    "DEFAULT_READ_TIMEOUT",
    "ENVELOPE_DEPTH",
    "JSON_LINES",
    "Conversation",
    "DatabaseUrl",
    "ForkOrigin",
    "Located",
    "Location",
    "Reading",
    "advised",
    "decoding_failure",
    "format_failure",
    "guess_encoding",
    "iter_lines",
    "load_document",
    "load_document_or_lines",
    "parse_json",
    "parse_line",
    "read_text",
    "read_with",
    "reading",
    "shown_source",
    "source_location",
    "source_path",
]


_SQLITE_URL = re.compile(r"^sqlite(\+\w+)?://(?P<path>/.*)$")
_POSTGRES_URL = re.compile(r"^postgres(ql)?(\+\w+)?://", re.IGNORECASE)
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


@dataclass(frozen=True, slots=True)
class DatabaseUrl:
    """A PostgreSQL database named by its URL (any ``postgresql+driver`` or
    ``postgres://``): read through asyncpg whatever driver the URL names."""

    url: URL
    """The URL as given, password included (SQLAlchemy's ``URL`` hides it when shown)."""

    @property
    def shown(self) -> str:
        """The URL as people and provenance see it: its password hidden."""
        return self.url.render_as_string(hide_password=True)

    @property
    def dsn(self) -> str:
        """What asyncpg connects to (the password included: never show it)."""
        return self.url.set(drivername="postgresql").render_as_string(hide_password=False)


Location = Path | DatabaseUrl
"""Where a source is: a file or folder, or a PostgreSQL database."""


def _sqlite_file(source: str) -> Path | None:
    if found := _SQLITE_URL.match(source):
        path = found["path"][1:]  # the third slash ends the (empty) host
        if not path:
            raise InvalidSource(source, None, "the URL names no database file")
        return Path(path)
    return None


def _postgres(source: str) -> DatabaseUrl:
    try:
        url = make_url(source)
    except ArgumentError:
        raise InvalidSource(_without_password(source), None, "not a valid URL") from None
    if not url.database:
        raise InvalidSource(DatabaseUrl(url).shown, None, "the URL names no database")
    return DatabaseUrl(url)


def _without_password(source: str) -> str:
    """``source`` with anything between ``:`` and ``@`` of its authority hidden (for a
    URL that does not parse)."""
    return re.sub(r"(://[^/:@]*:)[^/@]*@", r"\1***@", source)


def source_location(source: str | Path) -> Location:
    """Where a source is: a path as given, the file of a SQLite database URL
    (``sqlite:///relative.db``, ``sqlite:////absolute.db``, any ``sqlite+driver``), or
    a PostgreSQL database (``postgresql://USER:PASSWORD@HOST/DB``). A URL of another
    database is refused: :class:`~store.errors.InvalidSource`."""
    if isinstance(source, Path):
        return source
    path = _sqlite_file(source)
    if path is not None:
        return path
    if _POSTGRES_URL.match(source):
        return _postgres(source)
    if _URL.match(source):
        raise InvalidSource(
            _without_password(source),
            None,
            "only files, SQLite database URLs (sqlite:///PATH) and PostgreSQL URLs "
            "(postgresql://USER@HOST/DB) are read",
        )
    return Path(source)


def source_path(source: str | Path) -> Path:
    """Where a file source is (:func:`source_location`); a PostgreSQL URL is refused,
    since a file is expected."""
    location = source_location(source)
    if isinstance(location, DatabaseUrl):
        raise InvalidSource(location.shown, None, "a database URL where a file is expected")
    return location


def shown_source(source: str | Path, location: Location) -> str:
    """How the import names ``source`` in its report, errors and provenance: as given,
    except a database URL's password, which is hidden."""
    return location.shown if isinstance(location, DatabaseUrl) else str(source)


@dataclass(frozen=True, slots=True)
class Located:
    """One converted message and where it is in its source (``line 3``, ``row 12``)."""

    message: Message
    where: str


@dataclass(frozen=True, slots=True)
class ForkOrigin:
    """Where a fork's source says it was forked from: its parent session and the last
    message it took from it (None: forked from an empty session)."""

    parent_session_id: str
    fork_message_id: str | None


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
    origin: ForkOrigin | None = None
    """The fork it says it is (chatledger's ``jsonl``), on the first run of its session."""
    title: str | None = None
    """The title the source gives the session (an export's conversation title), on any
    run of its session."""
    notes: list[str] = field(default_factory=list)
    """What the reader left out of the conversation and counted (entries of unknown
    types, say), said among the import report's warnings when the conversation is
    imported."""


_BOMS = ((codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
_SAMPLE = 1 << 20
"""Bytes looked at to guess a file's encoding."""
_FEW = 16
"""Fewer bytes than this never look like UTF-16."""


DEFAULT_READ_TIMEOUT = 30.0
"""The seconds a database query may work between two rows when the store has no
``timeout`` of its own (the SQL backend's default)."""
ENVELOPE_DEPTH = 64
"""Levels a record may nest around the values the store checks (a line's session, its
messages, a message's contents): a record is refused when it nests deeper than this and
the store's ``max_json_depth`` together, so that nothing converts a value the store would
refuse anyway, and no reading recurses deeper than Python allows."""


@dataclass(frozen=True, slots=True)
class Reading:
    """How the sources of an import are read: what the command line's options and
    :func:`~store.importing.import_sources`' keywords of the same names say."""

    encoding: str | None = None
    """The text sources' encoding; None reads UTF-8 (a BOM allowed) or UTF-16 with a
    BOM."""
    allow_custom_roles: bool = False
    """Whether a role outside the standard ones is kept rather than refused."""
    timeout: float = DEFAULT_READ_TIMEOUT
    """Seconds a database source's query may work without giving a row (the store's
    ``timeout``)."""
    channel: str | None = None
    """The channel of a LangGraph checkpoint database whose messages are read (None:
    ``messages``)."""
    limits: Limits = DEFAULT_LIMITS
    """What the store accepts: a record nested deeper than its ``max_json_depth`` and
    :data:`ENVELOPE_DEPTH` is refused before it is converted."""


_DEFAULT_READING = Reading()
_READING: ContextVar[Reading | None] = ContextVar("chatledger_import_reading", default=None)


def reading() -> Reading:
    """How the import running in this context reads its sources."""
    return _READING.get() or _DEFAULT_READING


@contextmanager
def read_with(options: Reading) -> Iterator[None]:
    """Read the sources with ``options`` within the block (the importer's passes)."""
    token = _READING.set(options)
    try:
        yield
    finally:
        _READING.reset(token)


def _encoding(path: Path) -> str:
    given = reading().encoding
    if given is not None:
        return given
    with path.open("rb") as handle:
        head = handle.read(4)
    if head.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    for bom, name in _BOMS:
        if head.startswith(bom):
            return name
    return "utf-8"


def guess_encoding(data: bytes) -> str:
    """The likeliest encoding of text that did not decode: UTF-16 (without a BOM) when
    every other byte is mostly NUL, else Windows-1252 when it decodes so, else Latin-1
    (which decodes anything)."""
    even, odd = data[0::2].count(0), data[1::2].count(0)
    if len(data) >= _FEW and max(even, odd) > len(data) // 4:
        return "utf-16-le" if odd > even else "utf-16-be"
    try:
        data.decode("cp1252")
    except UnicodeDecodeError:
        return "latin-1"
    return "cp1252"


def _named(encoding: str) -> str:
    name = codecs.lookup(encoding).name
    if name.startswith(("utf-8", "utf-16")):
        return name[:6].upper()
    return encoding


def _undecodable(path: Path, encoding: str) -> tuple[str | None, str]:
    """Where the first line that does not decode is (``line 3``) and what is there."""
    if codecs.lookup(encoding).name.startswith("utf-16"):
        return None, "it does not decode"
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                raw.decode(encoding)
            except UnicodeDecodeError as error:
                column = len(raw[: error.start].decode(encoding, errors="replace")) + 1
                return f"line {number}", f"byte 0x{raw[error.start]:02x} at column {column}"
    return None, "it does not decode"


def decoding_failure(path: Path, source: str) -> InvalidSource:
    """Why the file does not decode, where, and the encoding to pass instead."""
    encoding = _encoding(path)
    where, what = _undecodable(path, encoding)
    with path.open("rb") as handle:
        guess = guess_encoding(handle.read(_SAMPLE))
    return InvalidSource(
        source,
        where,
        f"not {_named(encoding)} text ({what}); it looks like {guess}: pass --encoding {guess}",
    )


def iter_lines(path: Path, source: str) -> Iterator[tuple[int, str]]:
    """The file's non-blank lines with their 1-based numbers, read as they stream.

    In :func:`reading`'s encoding, else UTF-8 (a BOM allowed) or UTF-16 with a BOM;
    text that does not decode is an :class:`InvalidSource` naming the line and the
    encoding that would read it.
    """
    try:
        with path.open(encoding=_encoding(path), errors="strict", newline=None) as handle:
            for number, line in enumerate(handle, start=1):
                if line.strip():
                    yield number, line
    except UnicodeDecodeError:
        raise decoding_failure(path, source) from None


def read_text(path: Path, source: str) -> str:
    """The whole file as text (decoded as :func:`iter_lines` does)."""
    try:
        return path.read_text(encoding=_encoding(path), errors="strict")
    except UnicodeDecodeError:
        raise decoding_failure(path, source) from None


def _json_failure(error: json.JSONDecodeError, text: str) -> str:
    """What is wrong with the JSON and at which column; a text that ends before its
    JSON does says so (a line cut off)."""
    what = error.msg.removesuffix(" at")
    reason = f"not JSON: {what} at column {error.colno}"
    if error.pos >= len(text.rstrip()) or what.startswith("Unterminated"):
        reason += "; the text ends before its JSON does (cut off?)"
    return reason


def _too_deep(bound: int) -> str:
    limit = reading().limits.max_json_depth
    return (
        f"JSON nested deeper than {bound} levels (the store keeps values nested at most "
        f"{limit}: max_json_depth)"
    )


def parse_json(text: str | bytes, source: str, where: str) -> Any:
    """The JSON value of one record of a source (``where``: its line or row), refused
    with an :class:`InvalidSource` naming the place when it nests deeper than the store's
    ``max_json_depth`` and :data:`ENVELOPE_DEPTH` allow (also when Python's parser gives
    up on it first); :class:`json.JSONDecodeError` when it is not JSON."""
    bound = reading().limits.max_json_depth + ENVELOPE_DEPTH
    try:
        value = json.loads(text)
    except RecursionError:
        raise InvalidSource(source, where, _too_deep(bound)) from None
    if isinstance(value, dict | list) and _brackets(text) > bound:  # else it cannot be
        if json_depth(value, bound) > bound:
            raise InvalidSource(source, where, _too_deep(bound))
    return value


def _brackets(text: str | bytes) -> int:
    """How many lists and objects ``text`` may open at most (every bracket counted)."""
    if isinstance(text, bytes):
        return text.count(b"[") + text.count(b"{")
    return text.count("[") + text.count("{")


def parse_line(source: str, number: int, line: str) -> Any:
    """One JSONL line's value; a truncated or broken line is an :class:`InvalidSource`
    naming the line and the column, and so is one nested too deeply (:func:`parse_json`)."""
    try:
        return parse_json(line, source, f"line {number}")
    except json.JSONDecodeError as error:
        raise InvalidSource(source, f"line {number}", _json_failure(error, line)) from None


def load_document(path: Path, source: str) -> Any:
    """A whole JSON document (read whole: such formats cannot stream)."""
    text = read_text(path, source)
    try:
        return parse_json(text, source, "document")
    except json.JSONDecodeError as error:
        raise InvalidSource(source, f"line {error.lineno}", _json_failure(error, text)) from None


JSON_LINES: Any = object()
"""What :func:`load_document_or_lines` gives for JSONL under a document's name."""


def load_document_or_lines(path: Path, source: str) -> Any:
    """A whole JSON document, or :data:`JSON_LINES` when the file is JSONL whatever its
    name says: its first value ends a line and another starts the next (an ``export
    --format jsonl -o chat.json``, say). Any other JSON error is refused as
    :func:`load_document` refuses it."""
    text = read_text(path, source)
    try:
        return parse_json(text, source, "document")
    except json.JSONDecodeError as error:
        ended_a_line = text[: error.pos].rstrip(" \t\r").endswith("\n")
        if error.msg.startswith("Extra data") and ended_a_line:
            return JSON_LINES
        raise InvalidSource(source, f"line {error.lineno}", _json_failure(error, text)) from None


_ADVICE = (("pass allow_custom_roles=True", "pass --allow-custom-roles"),)
"""Advice of the message model, in the words of the import's options."""


def advised(error: InvalidSource) -> InvalidSource:
    """``error`` with its advice naming the import's options (``--allow-custom-roles``,
    the keyword ``allow_custom_roles`` of :func:`~store.importing.import_sources`)."""
    reason = error.reason
    for said, meant in _ADVICE:
        reason = reason.replace(said, meant)
    if reason == error.reason:
        return error
    return InvalidSource(error.source, error.where, reason)


def format_failure(source: str, where: str, error: FormatError) -> InvalidSource:
    """A converter's error, placed in the source (``line 3 message 2``)."""
    return InvalidSource(source, f"{where} message {error.index + 1}", error.problem)
