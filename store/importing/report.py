"""What an import stored (or, with ``dry_run``, would store), and what it left out."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ImportReport", "SkippedSource"]


class SkippedSource(BaseModel):
    """A source, or one session of it, left out of the import, and why."""

    model_config = ConfigDict(frozen=True)

    source: str
    """The file or database."""
    session_id: str | None
    """The session that was skipped (as it would have been stored); None when the whole
    source was, or the conversation has no id of its own."""
    reason: str
    """Why, in one line (the source, the line or row, the reason, what to do)."""
    where: str | None = None
    """Where the part left out starts in the source (``line 3``, ``session s1``); None
    when the whole source was."""


class ImportReport(BaseModel):
    """Counts of an import, over every source."""

    model_config = ConfigDict(frozen=True)

    formats: dict[str, str] = Field(default_factory=dict)
    """The format id of each source."""
    sessions: int = 0
    """Sessions imported: those the store holds from these sources now (or, with
    ``dry_run``, would); a session every source of which was skipped is not counted."""
    messages: int = 0
    """Their messages from these sources: ``new`` plus ``already_stored`` (a message
    that sources repeat counts once)."""
    tool_calls: int = 0
    """Calls among them (function and hosted calls)."""
    tool_results: int = 0
    """Results among them."""
    tokens: int = 0
    """Their tokens, counted with the store's tokenizer."""
    new: int = 0
    """Messages this import stored (with ``dry_run``: would store)."""
    already_stored: int = 0
    """Messages stored already with the same content (an earlier import)."""
    skipped: list[SkippedSource] = Field(default_factory=list)
    """What was left out, one entry a session or source, in the order of the sources;
    none of it is counted above."""
    usage_calls: int = 0
    """Model calls whose usage (as the source reported it) this import recorded in the
    usage ledger, each tied to its message; a call recorded by an earlier run is not
    counted again (none with ``dry_run``)."""
    warnings: list[str] = Field(default_factory=list)
    """Results that answer no call (imported as orphan groups), and the like."""
    session_ids: list[str] = Field(default_factory=list)
    """The imported sessions' ids, in the order they were read."""
    dry_run: bool = False
    """Whether nothing was written."""
