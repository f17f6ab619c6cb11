"""Stored text as the command line writes it: no character of it ever controls a
terminal.

Whatever a chat participant wrote (message text, session and message ids, author and
tool names, reasons, error messages that quote them) reaches a person's terminal only
through :func:`visible` (tables, lines, errors, questions) or :func:`json_safe`
(``--json``), on a terminal and piped alike:

- :func:`visible` writes every C0 and C1 control character, DEL, the line and paragraph
  separators and the bidirectional overrides as a visible escape (``\\x1b``, ``\\x9b``,
  ``\\u202e``; a tab, newline and carriage return as ``\\t``, ``\\n``, ``\\r``), so a line
  stays one line and no escape sequence is sent; :func:`flowing` first turns each run of
  spaces, tabs and line breaks into one space (message text in a table);
- :func:`json_safe` writes the same characters as JSON escapes (``\\u001b``), so the
  JSON reads back to exactly the stored text.

Rich, where it draws a table on a terminal, is given :class:`rich.text.Text`, never
markup: ``[red]`` in stored text is shown as it is.
"""

from __future__ import annotations

import re

__all__ = ["flowing", "json_safe", "visible"]

_CONTROLS = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
"""C0 and C1 controls, DEL, the line and paragraph separators, and the marks and
overrides of bidirectional text (which can show a line in another order than it is)."""
_RAW_IN_JSON = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
"""The characters of :data:`_CONTROLS` that JSON writes raw (it escapes the C0 ones; the
line breaks between its own tokens are not in a string)."""
_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
_SPACES = re.compile(r"[ \t\n\r\x0b\x0c]+")


def _escaped(match: re.Match[str]) -> str:
    character = match.group()
    code = ord(character)
    return _SHORT.get(character) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def visible(text: str) -> str:
    """``text`` with every control character written as a visible escape (one line)."""
    return _CONTROLS.sub(_escaped, text)


def flowing(text: str) -> str:
    """``text`` with each run of spaces, tabs and line breaks made one space, then
    :func:`visible`: running text on one line."""
    return visible(_SPACES.sub(" ", text).strip())


def _json_escaped(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def json_safe(text: str) -> str:
    """JSON text (as ``json.dumps(..., ensure_ascii=False)`` writes it) with every
    control character that JSON leaves raw (DEL, C1, separators, bidirectional marks)
    written as a ``\\uXXXX`` escape: the same JSON value, safe on a terminal."""
    return _RAW_IN_JSON.sub(_json_escaped, text)
