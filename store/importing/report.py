"""What an import did (or, with ``dry_run``, would do)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ImportReport", "SkippedSource"]


class SkippedSource(BaseModel):
    """A source, or one session of it, left out of the import, and why."""

    model_config = ConfigDict(frozen=True)

    source: str
    """The file or database."""
    session_id: str | None
    """The session that was skipped; None when the whole source was."""
    reason: str
    """Why, in one line (with the line or row)."""


class ImportReport(BaseModel):
    """Counts of an import, over every source."""

    model_config = ConfigDict(frozen=True)

    formats: dict[str, str] = Field(default_factory=dict)
    """The format id of each source."""
    sessions: int = 0
    """Sessions read (skipped ones excluded)."""
    messages: int = 0
    """Messages read (skipped sessions excluded)."""
    tool_calls: int = 0
    """Calls among them (function and hosted calls)."""
    tool_results: int = 0
    """Results among them."""
    tokens: int = 0
    """Their tokens, counted with the store's tokenizer."""
    new: int = 0
    """Messages that were not stored yet (and are now, unless ``dry_run``)."""
    already_stored: int = 0
    """Messages stored already with the same content (an earlier import)."""
    skipped: list[SkippedSource] = Field(default_factory=list)
    """What was left out, with the reasons."""
    warnings: list[str] = Field(default_factory=list)
    """Results that answer no call (imported as orphan groups), and the like."""
    session_ids: list[str] = Field(default_factory=list)
    """The imported sessions' ids, in the order they were read."""
    dry_run: bool = False
    """Whether nothing was written."""
