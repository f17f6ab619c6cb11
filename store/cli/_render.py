"""Rich tables for the CLI's results (pure: models in, renderables out)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

from rich.table import Table
from rich.text import Text

from store.models import CompactionEvent, SessionInfo, Stats, StoredMessage
from strategies.messages import (
    Content,
    DataContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    OtherContent,
    ReasoningContent,
    TextContent,
    UriContent,
)

__all__ = [
    "content_preview",
    "context_table",
    "events_table",
    "history_table",
    "sessions_table",
    "stats_table",
]

PREVIEW_CHARS = 70


def _when(value: datetime | None) -> str:
    return "" if value is None else value.strftime("%Y-%m-%d %H:%M:%S")


def _clip(text: str, limit: int = PREVIEW_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _json_text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _one(content: Content) -> str:
    if isinstance(content, TextContent):
        return content.text
    if isinstance(content, FunctionCallContent):
        return f"call {content.name}({_json_text(content.arguments or '')})"
    if isinstance(content, FunctionResultContent):
        label = "error" if content.is_error else "result"
        return f"{label}: {_json_text(content.result)}"
    if isinstance(content, ReasoningContent):
        return f"reasoning: {content.text or '…'}"
    if isinstance(content, DataContent | UriContent):
        return f"[{content.type} {content.media_type or ''}]".replace(" ]", "]")
    if isinstance(content, OtherContent):
        return f"[{content.kind}]"
    return f"[{type(content).__name__}]"  # pragma: no cover - the union is closed


def content_preview(message: Message) -> str:
    """One short line describing what a message holds."""
    return _clip(" | ".join(_one(c) for c in message.contents) or "(empty)")


def sessions_table(sessions: Sequence[SessionInfo]) -> Table:
    """Sessions with stored versus active counts."""
    table = Table(title="Sessions", title_justify="left")
    table.add_column("session", overflow="fold")
    table.add_column("updated", no_wrap=True)
    for name in ("messages", "active msgs", "tokens", "active tokens"):
        table.add_column(name, justify="right")
    for info in sessions:
        table.add_row(
            info.session_id,
            _when(info.updated_at),
            f"{info.stored_messages:,}",
            f"{info.active_messages:,}",
            f"{info.stored_tokens:,}",
            f"{info.active_tokens:,}",
        )
    return table


def _status(stored: StoredMessage) -> Text:
    if stored.excluded:
        reason = stored.excluded_reason or "excluded"
        return Text(f"EXCLUDED ({reason})", style="bold red")
    if stored.reduced is not None:
        return Text("reduced", style="yellow")
    return Text("")


def history_table(title: str, messages: Sequence[StoredMessage]) -> Table:
    """Stored messages; excluded ones are dimmed and marked EXCLUDED."""
    table = Table(title=title, title_justify="left")
    table.add_column("seq", justify="right")
    table.add_column("group")
    table.add_column("kind")
    table.add_column("role")
    table.add_column("tokens", justify="right")
    table.add_column("status")
    table.add_column("content", overflow="fold")
    for stored in messages:
        table.add_row(
            str(stored.seq),
            stored.group_id[-8:],
            stored.kind,
            stored.role,
            f"{stored.token_count:,}",
            _status(stored),
            content_preview(stored.message),
            style="dim" if stored.excluded else None,
        )
    return table


def context_table(title: str, messages: Sequence[Message], tokens: Sequence[int]) -> Table:
    """The projection the model would be sent, with each message's tokens."""
    table = Table(title=title, title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("role")
    table.add_column("tokens", justify="right")
    table.add_column("content", overflow="fold")
    for index, (message, count) in enumerate(zip(messages, tokens, strict=True), start=1):
        table.add_row(str(index), message.role, f"{count:,}", content_preview(message))
    return table


def _groups(event: CompactionEvent) -> str:
    parts = []
    if event.excluded:
        parts.append(f"{len(event.excluded)} excluded")
    if event.summarized:
        replaced = sum(len(ids) for ids in event.summarized.values())
        parts.append(f"{replaced} summarized")
    if event.reduced:
        parts.append(f"{len(event.reduced)} reduced")
    if event.restored:
        parts.append(f"{len(event.restored)} restored")
    return ", ".join(parts) or "-"


def events_table(events: Sequence[CompactionEvent], *, with_session: bool = True) -> Table:
    """Compaction events, with what they did and the tokens they saved."""
    table = Table(title="Compaction events", title_justify="left")
    table.add_column("when", no_wrap=True)
    if with_session:
        table.add_column("session", overflow="fold")
    table.add_column("phase", no_wrap=True)
    table.add_column("strategy", overflow="fold")
    table.add_column("groups", min_width=12)
    table.add_column("tokens before → after", justify="right", min_width=15)
    table.add_column("saved", justify="right", no_wrap=True)
    for event in events:
        session = (event.session_id,) if with_session else ()
        table.add_row(
            _when(event.created_at),
            *session,
            event.phase,
            event.strategy,
            _groups(event),
            f"{event.tokens_before:,} → {event.tokens_after:,}",
            f"{event.tokens_saved:,}",
        )
    return table


def stats_table(stats: Stats) -> Table:
    """Stored versus active messages, groups and tokens."""
    scope = f"session {stats.session_id}" if stats.session_id else f"tenant {stats.tenant}"
    table = Table(title=f"Stats ({scope})", title_justify="left")
    table.add_column("")
    table.add_column("stored", justify="right")
    table.add_column("active", justify="right")
    table.add_row("messages", f"{stats.stored_messages:,}", f"{stats.active_messages:,}")
    table.add_row("groups", f"{stats.stored_groups:,}", f"{stats.active_groups:,}")
    table.add_row("tokens", f"{stats.stored_tokens:,}", f"{stats.active_tokens:,}")
    table.add_row("sessions", f"{stats.sessions:,}", "")
    table.add_row("compaction events", f"{stats.events:,}", "")
    return table
