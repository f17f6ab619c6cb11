"""The audit page: one self-contained HTML document (inline CSS, SVG and a few lines of
script; a content security policy that allows no request at all).

It shows the session's counts, the token chart, the recorded model calls of each turn
(tokens sent by chatledger's count, input reported, cache reads, output, the cost when
prices are given, and the cache-prefix breaks), every compaction event with its outcome,
and the timeline of groups in projection order: kind, tokens, sent or excluded, the
event and reason that excluded each, summaries linked to the groups they replace and
back, reduced tool results beside their originals, pins, and the failed, blocked and
abandoned compactions where they happened; for a fork, the session and message it was
forked at, and a line where its own groups start. Runs of more than :data:`RUN` groups in a
row that the model is not sent (excluded or summarized, for whatever reason) fold into
one line that opens on demand and counts their reasons, and so do long runs of plain
sent groups, so that a session of 10,000 messages stays readable.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from html import escape

from store.models import CompactionEvent
from store.report.chart import token_chart
from store.report.timeline import GroupRow, Timeline
from store.usage import UsageRow

__all__ = ["RUN", "event_why", "render", "strategy_label"]

RUN = 6
"""Alike groups in a row above which they fold into one line."""

EVENTS_SHOWN = 20
"""Applied events listed at most before the older ones fold (those that did not apply
are always listed)."""

_CSS = """
:root{--sent:#1a7f37;--excl:#b42318;--summ:#6941c6;--muted:#667085;--line:#e4e7ec}
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1100px;padding:16px;color:#101828}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:24px 0 8px}
.muted{color:var(--muted)}dl.counts{display:grid;grid-template-columns:repeat(4,auto);gap:4px 18px}
dl.counts dt{color:var(--muted)}dl.counts dd{margin:0;font-weight:600}
.chart{width:100%;height:auto;border:1px solid var(--line);border-radius:6px}
.chart .axis{stroke:#98a2b3}.chart text{font-size:11px;fill:var(--muted)}
.chart polyline{fill:none;stroke-width:2}.chart .stored{stroke:#2e90fa;fill:#2e90fa}
.chart polyline.stored{fill:none}.chart .sent{stroke:var(--sent);fill:var(--sent)}
.chart polyline.sent{fill:none}.chart .point{fill:#2e90fa}
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid var(--line);
padding:4px 6px;text-align:left;vertical-align:top;overflow-wrap:anywhere}
td.num{white-space:nowrap}td.id{font-family:ui-monospace,monospace;font-size:12px}th{color:var(--muted);font-weight:500}
.badge{display:inline-block;border-radius:4px;padding:0 5px;font-size:12px;border:1px solid}
.sent .state,.badge.applied{color:var(--sent)}.excluded .state,.badge.failed,
.badge.blocked,.badge.abandoned{color:var(--excl)}.summarized .state{color:var(--summ)}
.group{display:grid;grid-template-columns:56px 110px 96px 84px minmax(0,1fr);gap:6px;
padding:4px 6px;border-bottom:1px solid var(--line);overflow-wrap:anywhere}
.group.excluded,.group.summarized{background:#fcfcfd;
color:#475467}.group:target,.event:target{outline:2px solid #2e90fa}
.kind{font-family:ui-monospace,monospace;font-size:12px}.num{text-align:right}
.why{font-size:12px;color:var(--muted)}.why a{color:inherit}
.reduction{display:grid;grid-template-columns:1fr 1fr;gap:8px;font-size:12px;margin-top:4px}
.reduction div{border:1px solid var(--line);border-radius:4px;padding:4px}
.marker{padding:6px;border-left:4px solid var(--excl);background:#fef3f2;margin:4px 0}
details.run>summary{cursor:pointer;padding:4px 6px;border-bottom:1px solid var(--line);
color:#475467}details.run[open]>summary{font-weight:600}
.pin{color:#b54708}
.marker.fork{border-left-color:#2e90fa;background:#eff8ff}
tr.turn-usage.broken td{background:#fffaeb}.badge.cache-break{color:#b54708}
"""

_SCRIPT = """
function openTarget(){var id=decodeURIComponent(location.hash.slice(1));if(!id)return;
var el=document.getElementById(id);for(var p=el;p;p=p.parentElement){
if(p.tagName==='DETAILS')p.open=true;}if(el)el.scrollIntoView({block:'center'});}
window.addEventListener('hashchange',openTarget);window.addEventListener('load',openTarget);
"""

_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
    "img-src data:; base-uri 'none'; form-action 'none'"
)


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _gid(group_id: str) -> str:
    return _e(f"g-{group_id}")


def _eid(event_id: str) -> str:
    return _e(f"e-{event_id}")


def _group_link(group_id: str) -> str:
    return f'<a href="#{_gid(group_id)}">{_e(group_id)}</a>'


def _event_link(event_id: str) -> str:
    return f'<a href="#{_eid(event_id)}">{_e(event_id)}</a>'


def render(timeline: Timeline) -> str:
    """The whole page of ``timeline``."""
    info = timeline.info
    title = f"chatledger audit: {info.session_id}"
    body = "\n".join(
        (
            f"<h1>{_e(title)}</h1>",
            f'<p class="muted">tenant {_e(info.tenant)} · tokenizer {_e(info.tokenizer)} · '
            f"updated {_e(info.updated_at.isoformat(timespec='seconds'))}</p>",
            _fork_line(timeline),
            _counts(timeline),
            "<h2>Tokens: stored against sent, after each turn</h2>",
            token_chart(timeline.points) or '<p class="muted">No turn yet.</p>',
            f'<h2 id="usage-title">Model calls per turn ({_calls(timeline)})</h2>',
            _usage(timeline),
            f'<h2 id="events-title">Compaction events ({len(timeline.events)}), newest first</h2>',
            _events(timeline.events),
            f'<h2 id="excluded-title">Groups not sent ({timeline.count() - timeline.count("sent")})'
            "</h2>",
            _excluded(timeline),
            f'<h2 id="timeline-title">Timeline of groups ({len(timeline.groups)})</h2>',
            '<div id="timeline">',
            *_timeline(timeline),
            "</div>",
        )
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{_CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_e(title)}</title><style>{_CSS}</style></head>
<body>
{body}
<script>{_SCRIPT}</script>
</body></html>
"""


def _fork_origin(timeline: Timeline) -> str | None:
    """``fork of PARENT at MESSAGE`` for a fork, as HTML (None for any other session)."""
    info = timeline.info
    parent, cut = info.parent_session_id, info.fork_message_id
    if parent is None and cut is None:
        return None
    at = f" at <code>{_e(cut)}</code>" if cut is not None else " (empty when forked)"
    of = f" of <b>{_e(parent)}</b>" if parent is not None else " of a deleted session"
    return f"fork{of}{at}"


def _fork_line(timeline: Timeline) -> str:
    origin = _fork_origin(timeline)
    if origin is None:
        return ""
    where = (
        ': its own groups follow <a href="#fork-point">the fork point</a>'
        if timeline.cut is not None
        else ""
    )
    return f'<p class="fork" id="fork-of">A {origin}{where}.</p>'


def _counts(timeline: Timeline) -> str:
    info = timeline.info
    outcomes = Counter(e.outcome for e in timeline.events)
    messages = f"{info.stored_messages:,} / {info.active_messages:,}"
    items = [
        ("groups", "groups", timeline.count()),
        ("sent", "sent", timeline.count("sent")),
        ("excluded", "excluded", timeline.count("excluded")),
        ("summarized", "summarized", timeline.count("summarized")),
        ("pinned", "pinned", timeline.pinned),
        ("reduced", "reduced", timeline.reduced),
        ("messages", "messages stored / sent", messages),
        ("tokens", "tokens stored / sent", f"{info.stored_tokens:,} / {info.active_tokens:,}"),
    ]
    items += [(f"outcome-{o}", f"{o} compactions", n) for o, n in sorted(outcomes.items())]
    total = timeline.usage_total
    if total is not None:
        items += [
            ("usage-calls", "model calls", f"{total.calls:,}"),
            ("cache-reads", "cache reads", _tokens(total.cache_read_tokens)),
            ("cache-breaks", "cache breaks", f"{total.cache_breaks:,}"),
        ]
        if timeline.priced:
            items.append(("cost", "cost", _money(total.cost)))
    cells = "".join(
        f'<div><dt>{_e(label)}</dt><dd id="count-{_e(key)}">{_e(value)}</dd></div>'
        for key, label, value in items
    )
    return f'<dl class="counts" id="counts">{cells}</dl>'


def _tokens(value: int | None) -> str:
    """A token total, or ``-`` where no call reported the lane."""
    return "-" if value is None else f"{value:,}"


def _money(value: float | None) -> str:
    """A cost in the prices' currency, to four decimals (``-``: nothing priced)."""
    return "-" if value is None else f"{value:,.4f}"


def _calls(timeline: Timeline) -> str:
    total = timeline.usage_total
    return f"{0 if total is None else total.calls:,}"


def _usage_row(row: UsageRow, priced: bool, *, total: bool = False) -> str:
    """One turn's calls (or their total): what chatledger sent by its own count, what
    the provider reported, the cost with prices, and the cache-prefix breaks."""
    breaks = ""
    if row.cache_breaks:
        many = f" ({row.cache_breaks})" if row.cache_breaks > 1 else ""
        breaks = f'<span class="badge cache-break">cache break{many}</span>'
    cost = f'<td class="num cost">{_money(row.cost)}</td>' if priced else ""
    if total:
        opening = '<tr class="usage-total"><th>total</th>'
    else:
        marked = " broken" if row.cache_breaks else ""
        opening = (
            f'<tr class="turn-usage{marked}" id="u-{_e(row.key)}" data-turn="{_e(row.key)}">'
            f'<td class="num">{_e(row.key)}</td>'
        )
    return (
        f'{opening}<td class="num calls">{row.calls:,}</td>'
        f'<td class="num sent">{_tokens(row.local_sent_tokens)}</td>'
        f'<td class="num input">{_tokens(row.input_tokens)}</td>'
        f'<td class="num cache-read">{_tokens(row.cache_read_tokens)}</td>'
        f'<td class="num output">{_tokens(row.output_tokens)}</td>'
        f'{cost}<td class="cache">{breaks}</td></tr>'
    )


def _usage(timeline: Timeline) -> str:
    """The recorded model calls, turn by turn (``docs/audit.md``)."""
    total = timeline.usage_total
    if total is None:
        return '<p class="muted">No model call recorded.</p>'
    priced = timeline.priced
    names = ["turn", "calls", "tokens sent (local)", "input reported", "cache reads", "output"]
    names += ["cost"] if priced else []
    head = "<tr>" + "".join(f'<th class="num">{n}</th>' for n in names) + "<th>cache</th></tr>"
    rows = [_usage_row(row, priced) for row in timeline.usage.values()]
    if len(rows) > 1:
        rows.append(_usage_row(total, priced, total=True))
    note = ""
    if priced and timeline.unpriced_models:
        calls = total.unpriced_calls
        note = (
            f'<p class="muted" id="unpriced">{calls:,} call{"s" if calls != 1 else ""} left '
            f"out of the cost: no price for {_e(', '.join(timeline.unpriced_models))}.</p>"
        )
    return f'<table id="usage">{head}{"".join(rows)}</table>{note}'


def _events(events: Sequence[CompactionEvent]) -> str:
    """The events, newest first (as ``chatledger audit`` lists them); applied events
    older than the newest :data:`EVENTS_SHOWN` fold."""
    if not events:
        return '<p class="muted">No compaction events.</p>'
    newest = list(reversed(events))
    applied = [e for e in newest if e.outcome == "applied"]
    older = {e.id for e in applied[EVENTS_SHOWN:]}
    shown = _event_table("events", [e for e in newest if e.id not in older])
    if not older:
        return shown
    folded = _event_table("events-older", [e for e in newest if e.id in older])
    label = f"{len(older)} earlier applied events"
    return f'{shown}<details class="run"><summary>{label}</summary>{folded}</details>'


def strategy_label(name: str) -> str:
    """A strategy as the command line names it (``context-window``), else as recorded
    (``import:agent_framework``, ``restore``)."""
    from strategies.specs import spec_name

    return spec_name(name) or name


def _share(tokens: int, budget: int) -> str:
    return f"{tokens / budget:.0%}" if budget > 0 else "-"


def event_why(event: CompactionEvent) -> str:
    """Why an event ran and what it aimed at, in words: the trigger that fired and the
    token budget it compacted to (for a strategy with a budget), the strategy's
    parameters otherwise, and the reasons of the groups it left out (plain text)."""
    from strategies.context_window import ContextWindowCompactionStrategy
    from strategies.specs import strategy_from_params

    parts: list[str] = []
    strategy = strategy_from_params(event.strategy, event.params)
    reasons = Counter(event.reasons.values())
    if isinstance(strategy, ContextWindowCompactionStrategy):
        budget = strategy.input_budget_tokens
        before = f"{event.tokens_before:,} tokens, {_share(event.tokens_before, budget)}"
        if "truncation" in reasons:
            parts.append(
                f"over {strategy.truncation_threshold:.0%} of the input budget of "
                f"{budget:,} ({before}): truncated toward "
                f"{strategy.tool_eviction_threshold:.0%} ({strategy.tool_eviction_tokens:,} "
                "tokens)"
            )
        else:
            parts.append(
                f"over {strategy.tool_eviction_threshold:.0%} of the input budget of "
                f"{budget:,} ({before}): old tool results collapsed"
            )
    elif event.phase in ("after_run", "manual"):
        shown = [f"{k}={v}" for k, v in sorted(event.params.items()) if _scalar(v)]
        if shown:
            parts.append(", ".join(shown))
    elif event.phase == "import":
        parts.append("the source had compacted it")
    elif event.phase == "restore":
        parts.append("asked for")
    if reasons:
        parts.append("reason " + ", ".join(f"{r} ({n})" for r, n in reasons.most_common()))
    parts += [d.message for d in event.diagnostics]
    return "; ".join(parts) or "-"


def _scalar(value: object) -> bool:
    return value is not None and isinstance(value, str | int | float | bool)


def _event_did(event: CompactionEvent) -> str:
    """What an event did, as HTML with links to the groups it touched."""
    summarized = {g for replaced in event.summarized.values() for g in replaced}
    what = []
    excluded = [g for g in event.excluded if g not in summarized]
    if excluded:
        what.append(f"{len(excluded)} excluded")
    for summary, replaced in event.summarized.items():
        what.append(f"{len(replaced)} summarized into {_group_link(summary)}")
    if event.reduced:
        what.append(f"{len(event.reduced)} reduced")
    if event.restored:
        what.append(f"{len(event.restored)} restored")
    if event.outcome != "applied":
        what.append("nothing changed")
    return "; ".join(what) or "-"


def _event_table(table_id: str, events: Sequence[CompactionEvent]) -> str:
    rows = []
    for event in events:
        run = [f"{event.attempts} attempt{'s' if event.attempts != 1 else ''}"]
        if event.duration_seconds is not None:
            run.append(f"{event.duration_seconds:.3f} s")
        if event.summarizer:
            by = event.summarizer.rsplit(".", 1)[-1]
            run.append(by + (f" ({event.summarizer_model})" if event.summarizer_model else ""))
        rows.append(
            f'<tr class="event" id="{_eid(event.id)}"><td class="id">{_e(event.id)}</td>'
            f"<td>{_e(event.created_at.isoformat(timespec='seconds'))}</td>"
            f'<td>{_e(event.phase)}</td><td class="strategy">'
            f"{_e(strategy_label(event.strategy))}</td>"
            f'<td><span class="badge {_e(event.outcome)}">{_e(event.outcome)}</span></td>'
            f'<td class="reason">{_e(event_why(event))}</td>'
            f'<td class="did">{_event_did(event)}</td>'
            f'<td class="num">{event.tokens_before:,} → {event.tokens_after:,}</td>'
            f"<td>{_e(', '.join(run))}</td></tr>"
        )
    head = (
        "<tr><th>event</th><th>when</th><th>phase</th><th>strategy</th><th>outcome</th>"
        "<th>why</th><th>what it did</th><th>tokens</th><th>run</th></tr>"
    )
    return f'<table id="{table_id}">{head}{"".join(rows)}</table>'


def _excluded(timeline: Timeline) -> str:
    """The groups the model is not sent, with their reasons, events and summaries."""
    hidden = [g for g in timeline.groups if g.state != "sent"]
    if not hidden:
        return '<p class="muted">Every group is sent.</p>'
    rows = []
    for group in hidden:
        event = _event_link(group.event_id) if group.event_id else "-"
        summary = _group_link(group.summarized_by) if group.summarized_by else "-"
        rows.append(
            f'<tr><td class="id">{_group_link(group.group_id)}</td><td>{_e(group.kind)}</td>'
            f'<td class="num">{group.turn}</td><td class="num">{group.tokens:,}</td>'
            f'<td class="reason">{_e(group.reason or "excluded")}</td><td>{event}</td>'
            f"<td>{summary}</td></tr>"
        )
    head = (
        "<tr><th>group</th><th>kind</th><th>turn</th><th>tokens</th><th>reason</th>"
        "<th>event</th><th>summary</th></tr>"
    )
    return f'<table id="excluded">{head}{"".join(rows)}</table>'


def _alike(group: GroupRow) -> str | None:
    """The key a run of foldable groups shares: sent, or not sent (None: always shown on
    its own: pinned groups, and the summaries and reduced results the model is sent)."""
    if group.pinned:
        return None
    if group.state == "sent":
        return None if group.summary_of or group.reductions else "sent"
    return "hidden"


def _timeline(timeline: Timeline) -> Iterator[str]:
    markers = [e for e in timeline.events if e.outcome != "applied"]
    at = 0
    run: list[GroupRow] = []

    def flush() -> Iterator[str]:
        if len(run) > RUN:
            yield _folded(run)
        else:
            yield from (_group(g) for g in run)
        run.clear()

    cut = timeline.cut
    for group in timeline.groups:
        while at < len(markers) and timeline.event_turns[markers[at].id] < group.turn:
            yield from flush()
            yield _marker(markers[at])
            at += 1
        if cut is not None and group.order[0] > cut:
            yield from flush()
            yield _fork_point(timeline)
            cut = None
        if run and _alike(group) != _alike(run[-1]):
            yield from flush()
        run.append(group)
        if _alike(group) is None:
            yield from flush()
    yield from flush()
    if cut is not None:
        yield _fork_point(timeline)
    for event in markers[at:]:
        yield _marker(event)


def _fork_point(timeline: Timeline) -> str:
    """The line before a fork's own groups (after the last it inherited)."""
    origin = _fork_origin(timeline)
    return f'<div class="marker fork" id="fork-point">{origin}: the fork\'s own groups follow</div>'


def _folded(run: Sequence[GroupRow]) -> str:
    tokens = sum(g.tokens for g in run)
    turns = f"turns {run[0].turn} to {run[-1].turn}"
    if _alike(run[0]) == "sent":
        label = f"{len(run)} groups sent: {turns}, {tokens:,} tokens"
        return f'<details class="run sent"><summary>{label}</summary>{_rows(run)}</details>'
    reasons = Counter(g.reason or "excluded" for g in run)
    events = Counter(g.event_id for g in run if g.event_id)
    why = ", ".join(f"{_e(r)} {n}" for r, n in reasons.most_common())
    by = ""
    if len(events) == 1:
        by = f" by {_e(next(iter(events)))}"
    elif events:
        by = f" by {len(events)} events"
    label = f"{len(run)} groups not sent{by} ({why}): {turns}, {tokens:,} tokens"
    return f'<details class="run excluded"><summary>{label}</summary>{_rows(run)}</details>'


def _rows(run: Sequence[GroupRow]) -> str:
    return "".join(_group(g) for g in run)


def _group(group: GroupRow) -> str:
    notes: list[str] = []
    if group.state != "sent":
        reason = _e(group.reason or "excluded")
        event = f" by {_event_link(group.event_id)}" if group.event_id else ""
        notes.append(f'<span class="reason">{reason}</span>{event}')
    if group.summarized_by:
        notes.append(
            f'<span class="summarized-by">summarized by {_group_link(group.summarized_by)}</span>'
        )
    if group.summary_of:
        links = ", ".join(_group_link(g) for g in group.summary_of)
        notes.append(
            f'<span class="replaces">replaces {len(group.summary_of)} groups: {links}</span>'
        )
    if group.pinned:
        notes.append('<span class="pin">pinned</span>')
    reductions = "".join(
        f'<div class="reduction"><div><b>original</b> ({r.tokens_before:,} tokens) '
        f"{_e(r.original)}</div><div><b>reduced</b> ({r.tokens_after:,} tokens) "
        f"{_e(r.reduced)}</div></div>"
        for r in group.reductions
    )
    why = f'<div class="why">{" · ".join(notes)}</div>' if notes else ""
    tokens = f"{group.tokens:,}"
    if group.state == "sent" and group.sent_tokens != group.tokens:
        tokens = f"{group.sent_tokens:,} of {group.tokens:,}"
    return (
        f'<div class="group {group.state}" id="{_gid(group.group_id)}" '
        f'data-kind="{_e(group.kind)}" data-state="{group.state}">'
        f'<span class="muted">turn {group.turn}</span><span class="kind">{_e(group.kind)}</span>'
        f'<span class="state">{group.state}</span><span class="num">{tokens}</span>'
        f"<span>{_e(group.preview)}{why}{reductions}</span></div>"
    )


def _marker(event: CompactionEvent) -> str:
    why = "; ".join(d.message for d in event.diagnostics) or "nothing applied"
    return (
        f'<div class="marker {_e(event.outcome)}">compaction {_e(event.outcome)}: '
        f"{_e(strategy_label(event.strategy))}, {_e(why)} ({_event_link(event.id)}, "
        f"{event.attempts} attempt{'s' if event.attempts != 1 else ''})</div>"
    )
