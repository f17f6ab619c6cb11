"""Erasure: what a redacted message becomes, which summaries a redaction reaches, and
which sessions a purge removes. Pure rules, the same on every backend.

A redacted message is replaced by its *tombstone*: the same id, role and creation time,
each content replaced by one of the same pairing (a call keeps its ``call_id`` and tool
name, a result its ``call_id``, a hosted call or result its ``call_id`` and pairing)
with every text, argument, result, payload and ``extra`` dropped, the author name and
metadata dropped, and the redaction recorded in the metadata under
:data:`~store.rules.identity.REDACTION_KEY`. A history with tombstones is still valid
for a model: no call loses its result, no result its call.

The row keeps no hash of the message it replaced (its hash becomes
:data:`~store.rules.identity.REDACTED_HASH`): the id identifies it, so that appending or
importing any message under that id again is a replay (already stored), never a restore;
appending a tombstone over a stored message (an exported session imported back) is a
replay too (see :func:`~store.rules.identity.dedupe`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from pydantic import JsonValue

from store.errors import InvalidInput
from store.rules.checks import check_text, checked_ids
from store.rules.identity import REDACTED_HASH, REDACTION_KEY, is_tombstone
from store.rules.limits import Limits, check_json
from strategies.messages import (
    Content,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    OtherContent,
    ReasoningContent,
    TextContent,
)

if TYPE_CHECKING:
    from store.rules.records import Counter, MessageRecord, SessionRecord

__all__ = [
    "REDACTED_SUMMARY_TEXT",
    "REDACTED_TEXT",
    "check_redaction",
    "covering_summaries",
    "purge_cutoff",
    "redact_records",
    "tombstone",
]

REDACTED_TEXT = "[redacted]"
"""What a redacted text, reasoning, argument or result reads."""

REDACTED_SUMMARY_TEXT = "[redacted: this summary covered redacted messages]"
"""What a summary covering a redacted message reads."""


def _tombstone_content(content: Content) -> Content:
    if isinstance(content, FunctionCallContent):
        return FunctionCallContent(call_id=content.call_id, name=content.name, arguments={})
    if isinstance(content, FunctionResultContent):
        return FunctionResultContent(
            call_id=content.call_id, result=REDACTED_TEXT, is_error=content.is_error
        )
    if isinstance(content, OtherContent) and content.pairing != "none":
        return OtherContent(kind=content.kind, call_id=content.call_id, pairing=content.pairing)
    if isinstance(content, ReasoningContent):
        return ReasoningContent(text=REDACTED_TEXT)
    return TextContent(text=REDACTED_TEXT)


def tombstone(message: Message, *, reason: str, event_id: str, summary: bool = False) -> Message:
    """What ``message`` becomes once redacted (see the module docstring); a summary's
    tombstone reads :data:`REDACTED_SUMMARY_TEXT`."""
    if summary:
        contents: list[Content] = [TextContent(text=REDACTED_SUMMARY_TEXT)]
    else:
        contents = []
        for content in message.contents:
            replaced = _tombstone_content(content)
            if isinstance(replaced, TextContent | ReasoningContent) and contents:
                if type(contents[-1]) is type(replaced):
                    continue  # one placeholder for a run of texts
            contents.append(replaced)
    marker: dict[str, JsonValue] = {"reason": reason, "event_id": event_id}
    return message.model_copy(
        update={"contents": contents, "author_name": None, "metadata": {REDACTION_KEY: marker}}
    )


def covering_summaries(
    summary_of: Mapping[str, Iterable[str]], group_ids: Iterable[str]
) -> list[str]:
    """The summary groups that cover any of ``group_ids``, directly or through other
    summaries (``summary_of`` maps each summary group to the groups it replaced)."""
    covers: dict[str, list[str]] = {}
    for summary, replaced in summary_of.items():
        for group_id in replaced:
            covers.setdefault(group_id, []).append(summary)
    found: list[str] = []
    todo = list(group_ids)
    while todo:
        for summary in covers.get(todo.pop(), ()):
            if summary not in found:
                found.append(summary)
                todo.append(summary)
    return found


def _bury(row: MessageRecord, grave: Message, count: Counter, cleared: list[str]) -> None:
    if row.reduced is not None:
        cleared.append(row.message.message_id)
    row.message = grave
    row.digest = REDACTED_HASH
    row.tokens = count(grave)
    row.reduced = None
    row.reduced_tokens = None
    row.reduced_event = None


def redact_records(
    session: SessionRecord,
    message_ids: Iterable[str],
    *,
    reason: str,
    event_id: str,
    count: Counter,
) -> tuple[list[str], list[str], list[str]]:
    """Redact the messages of ``session`` (every id must be stored) and the summaries
    that cover them, in place; return the ids of the redacted messages, of the redacted
    summaries and of those whose reduction was cleared (already redacted ones left
    out)."""
    redacted: list[str] = []
    cleared: list[str] = []
    touched: set[str] = set()
    for message_id in message_ids:
        row = session.rows[message_id]
        touched.add(row.group_id)
        if is_tombstone(row.message):
            continue
        _bury(row, tombstone(row.message, reason=reason, event_id=event_id), count, cleared)
        redacted.append(message_id)
    summary_of = {g.group_id: g.summary_of for g in session.groups.values() if g.kind == "summary"}
    summaries: list[str] = []
    for group_id in covering_summaries(summary_of, touched):
        group = session.groups[group_id]
        for row in session.group_rows(group):
            if is_tombstone(row.message):
                continue
            grave = tombstone(row.message, reason=reason, event_id=event_id, summary=True)
            _bury(row, grave, count, cleared)
            summaries.append(row.message.message_id)
    return redacted, summaries, cleared


def check_redaction(message_ids: object, reason: object, limits: Limits) -> tuple[str, ...]:
    """The ids a redaction asks for, each once, in order; :class:`InvalidInput` for no
    ids, ids or a reason that are not text a store keeps, or a blank reason."""
    ids = tuple(dict.fromkeys(checked_ids(message_ids, "message_ids")))
    if not ids:
        raise InvalidInput("message_ids is empty: name the messages to redact")
    for message_id in ids:
        limits.check_id(message_id, "each of message_ids")
    check_text(reason, "reason")
    assert isinstance(reason, str)
    if not reason.strip():
        raise InvalidInput("reason is blank: say why the messages are redacted")
    check_json(reason, "reason", limits)
    return ids


def purge_cutoff(older_than: object, now: datetime) -> datetime:
    """The instant a purge removes sessions last updated before: ``older_than`` itself
    (an aware datetime) or ``now`` minus it (a non-negative timedelta)."""
    if isinstance(older_than, timedelta):
        if older_than < timedelta(0):
            raise InvalidInput(f"older_than must not be negative, got {older_than}")
        try:
            return now - older_than
        except OverflowError:
            raise InvalidInput(f"older_than is too long ago: {older_than}") from None
    if not isinstance(older_than, datetime):
        raise InvalidInput(
            f"older_than must be a datetime or a timedelta, got {type(older_than).__name__}"
        )
    if older_than.tzinfo is None:
        raise InvalidInput("older_than must be timezone-aware (for example datetime.now(UTC))")
    return older_than
