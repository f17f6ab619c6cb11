"""The mark of an import that writes a session in more than one transaction.

An import writes most sessions in one transaction each: whole or not at all. A session
it must write in parts (larger than one write, or read from several sources) is marked
first, in the session's metadata under :data:`IMPORT_MARK_KEY`, and the mark is taken
off once its last part is written. A mark still there says an import of the session was
interrupted: how many messages the session holds once the import is done, and how many
it held before, tell what is missing (:func:`verdict`). Running the same import again
completes it and takes the mark off; ``doctor`` reports it, and its ``--fix`` removes
what the interrupted import stored when the import created the session.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

__all__ = ["IMPORT_MARK_KEY", "ImportMark", "Verdict", "mark_of", "verdict", "with_mark"]

IMPORT_MARK_KEY = "chatledger_import"
"""The session metadata key of the mark."""

Verdict = Literal["done", "partial"]
"""``done``: the session holds every message of the import (only the mark was left);
``partial``: some are missing."""


class ImportMark(BaseModel):
    """What an import writing a session in parts records before its first part."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    system: str
    """The source system (format id)."""
    sources: tuple[str, ...]
    """The sources the session is read from, as the import named them."""
    expected: int
    """The messages the session holds once the import is done."""
    held: int
    """The messages it held before the import began."""


def mark_of(metadata: Mapping[str, Any]) -> ImportMark | None:
    """The import mark in a session's metadata; None when there is none, or when what
    is under the key is not a mark (it is then the caller's own data)."""
    value = metadata.get(IMPORT_MARK_KEY)
    if not isinstance(value, dict):
        return None
    try:
        return ImportMark.model_validate(value)
    except ValidationError:
        return None


def with_mark(metadata: Mapping[str, Any], mark: ImportMark | None) -> dict[str, Any]:
    """``metadata`` with ``mark`` under :data:`IMPORT_MARK_KEY` (without it for None)."""
    found = {k: v for k, v in metadata.items() if k != IMPORT_MARK_KEY}
    if mark is not None:
        found[IMPORT_MARK_KEY] = mark.model_dump(mode="json")
    return found


def verdict(mark: ImportMark, stored_messages: int) -> Verdict:
    """Whether the import the mark records wrote everything (the session holds as many
    messages as it expects, or more: written since)."""
    return "done" if stored_messages >= mark.expected else "partial"
