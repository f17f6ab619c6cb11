"""The token chart: stored against sent tokens over the turns, as inline SVG."""

from __future__ import annotations

from collections.abc import Sequence

from store.report.timeline import TurnPoint

__all__ = ["MAX_POINTS", "token_chart"]

MAX_POINTS = 600
"""Points drawn at most per line (longer sessions are sampled evenly, last turn kept)."""

_WIDTH, _HEIGHT, _PAD = 880, 260, 72


def _sample(points: Sequence[TurnPoint]) -> list[TurnPoint]:
    if len(points) <= MAX_POINTS:
        return list(points)
    step = len(points) / MAX_POINTS
    chosen = [points[int(i * step)] for i in range(MAX_POINTS - 1)]
    return [*chosen, points[-1]]


def token_chart(points: Sequence[TurnPoint]) -> str:
    """An SVG line chart of ``points`` (empty string when there is no turn)."""
    if not points:
        return ""
    shown = _sample(points)
    top = max(max(p.stored for p in shown), 1)
    first, last = shown[0].turn, shown[-1].turn
    span = max(last - first, 1)

    def x(turn: int) -> float:
        return _PAD + (turn - first) * (_WIDTH - 2 * _PAD) / span

    def y(tokens: int) -> float:
        return _HEIGHT - _PAD + 8 - max(tokens, 0) * (_HEIGHT - 2 * _PAD) / top

    def line(values: list[tuple[int, int]]) -> str:
        return " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in values)

    stored = line([(p.turn, p.stored) for p in shown])
    sent = line([(p.turn, p.sent) for p in shown])
    end = points[-1]
    label = (
        f"Tokens over {len(points)} turns: {end.stored:,} stored, {end.sent:,} sent "
        f"after the last turn"
    )
    base = _HEIGHT - _PAD + 8
    marks = "".join(
        f'<circle class="point" cx="{x(p.turn):.1f}" cy="{y(p.stored):.1f}" r="2.5" '
        f'data-turn="{p.turn}" data-stored="{p.stored}" data-sent="{p.sent}">'
        f"<title>turn {p.turn}: {p.stored:,} stored, {p.sent:,} sent</title></circle>"
        for p in shown
    )
    return f"""<svg id="token-chart" class="chart" viewBox="0 0 {_WIDTH} {_HEIGHT}" role="img"
 aria-label="{label}">
<title>{label}</title>
<line class="axis" x1="{_PAD}" y1="{base}" x2="{_WIDTH - _PAD}" y2="{base}"/>
<line class="axis" x1="{_PAD}" y1="{_PAD - 8}" x2="{_PAD}" y2="{base}"/>
<text x="{_PAD - 6}" y="{_PAD - 4}" text-anchor="end">{top:,}</text>
<text x="{_PAD - 6}" y="{base}" text-anchor="end">0</text>
<text x="{_PAD}" y="{base + 18}">turn {first}</text>
<text x="{_WIDTH - _PAD}" y="{base + 18}" text-anchor="end">turn {last}</text>
<polyline class="stored" points="{stored}"/>
<polyline class="sent" points="{sent}"/>
<g class="points">{marks}</g>
<g class="legend"><rect class="stored" x="{_PAD + 12}" y="8" width="14" height="4"/>
<text x="{_PAD + 32}" y="14">stored ({end.stored:,})</text>
<rect class="sent" x="{_PAD + 200}" y="8" width="14" height="4"/>
<text x="{_PAD + 220}" y="14">sent ({end.sent:,})</text></g>
</svg>"""
