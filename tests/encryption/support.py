"""What the encryption tests share: a marked corpus that exercises every sealed column,
a snapshot of everything a store reads back, and raw SQL on the tables (the tampering
and the look at sealed columns go around the store, as an attacker or a backup would).

:func:`build_corpus` writes, through any store, every kind of text the store seals,
each carrying a marker word of its own (:data:`MARKERS`): every content type, author
names, message and session metadata, a title, a summary, a reduction, a compaction
request's reason and focus, and a fork, a rewind and its restore, and the deletion of a
parent that has a fork. :func:`snapshot` reads it all back as plain data without the
random ids and times, so that a sealed store and a plain one compare equal.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from store.contract import HistoryBackend
from store.sql.drivers.engine import create_engine, normalize_url
from strategies.messages import (
    DataContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    OtherContent,
    ReasoningContent,
    TextContent,
    UriContent,
)
from strategies.reduction import ToolResultReductionStrategy
from strategies.summarization import SummarizationStrategy
from strategies.summarizers import FakeSummarizer

TENANT = "acme"
"""The tenant every corpus is written for."""

MARKERS: dict[str, str] = {
    kind: f"qzv{kind}mark"
    for kind in (
        "text",
        "reasoning",
        "payload",
        "callname",
        "callargs",
        "result",
        "data",
        "uri",
        "other",
        "extra",
        "author",
        "msgmeta",
        "sessmeta",
        "title",
        "summary",
        "reduced",
        "reason",
        "focus",
        "forktext",
        "tailtext",
    )
}
"""One marker word per kind of sealed text: none may be found in the database's bytes."""


def _m(kind: str) -> str:
    return MARKERS[kind]


def _reduce(result: str) -> str:
    """The reducer of tool ``lookup``: a short text carrying its own marker."""
    return f"{_m('reduced')} of {len(result)} characters"


class MarkedSummarizer(FakeSummarizer):
    """The deterministic fake, whose summaries carry the summary marker."""

    async def summarize(
        self, messages: Sequence[Message], *, prompt: str, focus: str | None = None
    ) -> str:
        """The fake's summary, marked."""
        summary = await super().summarize(messages, prompt=prompt, focus=focus)
        return f"{summary} {_m('summary')}"


def corpus_messages() -> list[Message]:
    """Six turns holding every content type, with author names and metadata."""
    m = _m
    turns: list[Message] = [
        Message(
            role="user",
            message_id="u1",
            author_name=f"{m('author')} Ada",
            metadata={"trace": f"{m('msgmeta')} one", "n": 1},
            contents=[TextContent(text=f"{m('text')} what is the weather, grüße 🙂")],
        ),
        Message(
            role="assistant",
            message_id="a1",
            contents=[
                ReasoningContent(text=f"{m('reasoning')} think", payload={"sig": m("payload")}),
                FunctionCallContent(
                    call_id="c1", name=m("callname"), arguments={"city": m("callargs")}
                ),
            ],
        ),
        Message(
            role="tool",
            message_id="t1",
            contents=[
                FunctionResultContent(call_id="c1", result={"rows": [m("result")] * 40, "ok": True})
            ],
        ),
        Message(
            role="assistant",
            message_id="a1b",
            contents=[
                DataContent(data=f"data:text/plain;base64,{m('data')}", media_type="text/plain"),
                UriContent(uri=f"https://example.com/{m('uri')}.png", media_type="image/png"),
                OtherContent(
                    kind="hosted_note",
                    payload={"what": m("other")},
                    extra={"vendor": m("extra")},
                ),
                TextContent(text="sunny"),
            ],
        ),
    ]
    for n in range(2, 6):
        turns += [
            Message(role="user", message_id=f"u{n}", contents=[TextContent(text=f"question {n}")]),
            Message(
                role="assistant",
                message_id=f"a{n}c",
                contents=[FunctionCallContent(call_id=f"c{n}", name="lookup", arguments="{}")],
            ),
            Message(
                role="tool",
                message_id=f"t{n}",
                contents=[FunctionResultContent(call_id=f"c{n}", result="long result " * 30)],
            ),
            Message(
                role="assistant", message_id=f"a{n}", contents=[TextContent(text=f"answer {n}")]
            ),
        ]
    return turns


async def build_corpus(store: HistoryBackend) -> None:
    """Write the marked corpus through ``store`` (see the module docstring).

    Sessions: ``main`` (compacted: a reduction, a summary requested with focus, then a
    request left waiting), ``keep`` (a fork of ``parent`` that reduces rows its parent
    owns, then its parent is deleted),
    ``tails`` (rewound, a new tail appended, the rewind restored)."""
    m = _m
    await store.append("main", corpus_messages())
    await store.set_metadata("main", {"owner": m("sessmeta"), "tags": ["x", m("sessmeta")]})
    await store.set_title("main", f"{m('title')} weather chat")
    reduction = ToolResultReductionStrategy(
        reducers={"lookup": _reduce}, minimum_preserved_groups=2
    )
    reduced = await store.compact("main", reduction)
    assert reduced is not None and reduced.reduced, reduced
    await store.request_compaction("main", reason=f"{m('reason')} full", focus=m("focus"))
    summarizing = SummarizationStrategy(client=MarkedSummarizer(), target_count=6, threshold=100)
    summarized = await store.compact("main", summarizing)
    assert summarized is not None and summarized.summarized, summarized
    await store.request_compaction("main", reason="again", focus=f"{m('focus')} later")

    await store.append("parent", corpus_messages()[:12])
    await store.set_title("parent", f"{m('title')} parent")
    await store.fork("parent", at="a2", new_session_id="keep")
    await store.append(
        "keep", Message(role="user", message_id="k1", contents=[TextContent(text=m("forktext"))])
    )
    forked = await store.compact("keep", reduction)  # of rows the parent owns
    assert forked is not None and forked.reduced, forked
    await store.delete_session("parent")

    await store.append("tails", corpus_messages()[:8])
    rewound = await store.rewind("tails", to="a1b")
    assert rewound is not None
    await store.append(
        "tails", Message(role="user", message_id="n1", contents=[TextContent(text=m("tailtext"))])
    )
    restored = await store.restore("tails", event_id=rewound.id)
    assert restored is not None


SESSIONS = ("main", "keep", "tails")
"""The sessions :func:`build_corpus` leaves (``parent`` is deleted)."""

_RANDOM_KEYS = frozenset(
    {
        "created_at",
        "updated_at",
        "stored_at",
        "imported_at",
        "excluded_at",
        "duration_seconds",
        "id",
        "event_id",
        "excluded_event_id",
        "reduced_event_id",
        "branch_event_id",
        "revision",
    }
)
_RANDOM_TEXT = re.compile(r"(evt|key|tail|fork)[-_][0-9a-zA-Z_-]{6,}")


def _plain(value: Any) -> Any:
    """``value`` without what differs between two runs (times, random ids)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k not in _RANDOM_KEYS}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, str):
        return _RANDOM_TEXT.sub("<id>", value)
    return value


async def snapshot(store: HistoryBackend) -> dict[str, Any]:
    """Everything the store reads back of the corpus, as comparable plain data."""
    out: dict[str, Any] = {}
    for session_id in SESSIONS:
        info = await store.session(session_id)
        history = await store.history(session_id, include_excluded=True)
        branches = await store.branches(session_id)
        tails = [
            await store.history(b.session_id, include_excluded=True)
            for b in branches
            if b.relation == "tail"
        ]
        out[session_id] = _plain(
            {
                "info": info.model_dump(mode="json"),
                "history": [m.model_dump(mode="json") for m in history],
                "context": [m.model_dump(mode="json") for m in await store.context(session_id)],
                "metadata": await store.get_metadata(session_id),
                "audit": [e.model_dump(mode="json") for e in await store.audit(session_id)],
                "excluded": [g.model_dump(mode="json") for g in await store.excluded(session_id)],
                "branches": [b.model_dump(mode="json") for b in branches],
                "tails": [[m.model_dump(mode="json") for m in tail] for tail in tails],
            }
        )
    return out


# --- raw SQL --------------------------------------------------------------------------


@asynccontextmanager
async def raw(url: str) -> AsyncIterator[AsyncConnection]:
    """A connection to ``url`` in a transaction, beside any store (SQL on the tables)."""
    engine = create_engine(normalize_url(url))
    try:
        async with engine.begin() as conn:
            yield conn
    finally:
        await engine.dispose()


def json_param(conn: AsyncConnection, name: str = "v") -> str:
    """A bind parameter that a JSON column takes as its text, as it is."""
    return f"CAST(:{name} AS json)" if conn.dialect.name == "postgresql" else f":{name}"


async def sealed_texts(url: str, tenant: str = TENANT) -> list[str]:
    """Every non-null text of the tenant's sealed columns, as the database holds it."""
    columns = {
        "chatledger_messages": ("contents", "metadata", "reduced_contents", "author_name"),
        "chatledger_branch_rows": ("reduced_contents",),
        "chatledger_sessions": ("metadata", "title", "compaction_request"),
        "chatledger_events": ("params", "note"),
    }
    found: list[str] = []
    async with raw(url) as conn:
        for table, names in columns.items():
            for name in names:
                query = text(
                    f"SELECT CAST({name} AS TEXT) FROM {table} "
                    f"WHERE tenant = :t AND {name} IS NOT NULL"
                )
                found += [str(v) for (v,) in await conn.execute(query, {"t": tenant})]
    return found
