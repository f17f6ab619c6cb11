"""Printing for people: aligned columns that never split an id or a number.

A :class:`Table` is columns of text cells laid out by their display width (a wide
character or an emoji takes two cells). Piped (stdout not a terminal), nothing is
shortened or wrapped: each row is one line, whatever its length, ids whole, so that
piped output can be searched and copied as it is. On a terminal a row never takes
more than one line: the ``flex`` columns (content, reasons, outcomes) shorten first,
with an ellipsis, the last one first, down to a quarter of the width; then ``ids``
columns shorten to a start that is unique among the column's ids and the ids it is
told of (:mod:`store.cli._prefix`, as git shortens hashes; every command reads such a
prefix back); then columns that may ``drop`` are left out, the highest ``drop`` first;
then the ``flex`` columns shorten further. Numbers and times are never cut.
Columns marked ``constant`` are left out when every row has the same value, which the
title states once instead. A rule is a line of its own between rows, outside the
columns (where a fork's own messages start). Titles and rules are cut to the width.

On a terminal the header is bold and rows may carry a style (rich); elsewhere, or with
``NO_COLOR``, the text is plain. Every cell, title and line goes out through
:mod:`store.cli._visible`: a control character of stored text is shown as an escape
(``\\x1b``), never sent; the ``flex`` columns' line breaks and tabs are spaces.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from store.cli._prefix import unique_lengths
from store.cli._visible import flowing, visible
from store.cli._width import cut, width

__all__ = ["Column", "Table", "echo", "number", "print_table", "render", "when"]

ELLIPSIS = "…"
MIN_FLEX = 12
"""The narrowest a ``flex`` column gets before ids shorten and columns drop."""
LEAST_FLEX = 2
"""The narrowest a ``flex`` column gets at all (a character and the ellipsis)."""
GAP = "  "
RULE_STYLE = "bold cyan"
"""The style of a table's rules on a terminal."""


@dataclass(frozen=True, slots=True)
class Column:
    """One column: its header, alignment, and whether it may shrink or collapse."""

    header: str
    align: Literal["left", "right"] = "left"
    flex: bool = False
    """The column that is shortened to fit a terminal (at most one a table)."""
    constant: bool = False
    """Left out when every row has the same value (the title says it once)."""
    ids: bool = False
    """Ids: on a terminal too narrow for them, each shows a unique start of itself."""
    among: frozenset[str] = frozenset()
    """Further ids a shortened id must not be the start of (the session's others)."""
    drop: int = 0
    """Left out on a terminal too narrow for the row, the highest first (0: never)."""


@dataclass
class Table:
    """A titled grid of text cells, with an optional style per row."""

    title: str
    columns: list[Column]
    rows: list[list[str]] = field(default_factory=list)
    styles: list[str | None] = field(default_factory=list)
    rules: dict[int, str] = field(default_factory=dict)
    """Lines of their own, outside the columns, by the index of the row they precede
    (the number of rows: after the last)."""

    def add(self, *cells: str, style: str | None = None) -> None:
        """Append a row (one cell per column)."""
        if len(cells) != len(self.columns):
            raise ValueError(f"expected {len(self.columns)} cells, got {len(cells)}")
        self.rows.append(list(cells))
        self.styles.append(style)

    def rule(self, before: int, text: str) -> None:
        """Draw ``text`` as a line of its own before row ``before`` (a marker such as
        where a fork's own messages start); it never widens a column."""
        self.rules[before] = text

    def line_styles(self) -> list[str | None]:
        """The style of each line :func:`render` writes after the header."""
        styles: list[str | None] = []
        for index in range(len(self.rows) + 1):
            if index in self.rules:
                styles.append(RULE_STYLE)
            if index < len(self.rows):
                styles.append(self.styles[index])
        return styles


def number(value: int) -> str:
    """An integer with thousands separators (one token, never split)."""
    return f"{value:,}"


def quantity(value: int, noun: str, plural: str | None = None) -> str:
    """``value`` and its noun, singular for one: ``1 session``, ``2,048 sessions``."""
    return f"{value:,} {noun if value == 1 else plural or noun + 's'}"


def when(value: datetime | None) -> str:
    """A timestamp in UTC with its zone: ``2026-12-01T09:51:30Z``."""
    if value is None:
        return "-"
    moment = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _collapsed(table: Table) -> tuple[str, list[int]]:
    """The title with the constant columns stated once, and the indexes kept."""
    keep: list[int] = []
    stated: list[str] = []
    for index, column in enumerate(table.columns):
        values = {row[index] for row in table.rows}
        if column.constant and len(table.rows) > 1 and len(values) == 1:
            said = f"{column.header} {values.pop()}"
            if said not in table.title:  # "events of session S" says it already
                stated.append(said)
        else:
            keep.append(index)
    title = table.title + (f" ({'; '.join(stated)})" if stated else "")
    return title, keep


def _id_floors(columns: list[Column], rows: list[list[str]], natural: list[int]) -> list[int]:
    """The narrowest each ``ids`` column gets: its longest unique start (the header at
    least); every other column its whole width."""
    floors = list(natural)
    for k, column in enumerate(columns):
        if column.ids and rows:
            cells = [row[k] for row in rows]
            lengths = unique_lengths(cells, column.among)
            needed = max(width(cell[: lengths[cell]]) for cell in cells)
            floors[k] = min(natural[k], max(width(column.header), needed))
    return floors


def _flex_floors(columns: list[Column], natural: list[int], least: int) -> list[int]:
    """``least`` cells for each ``flex`` column (its whole width when narrower)."""
    return [min(natural[k], least) if c.flex else natural[k] for k, c in enumerate(columns)]


Stage = tuple[list[int], bool]
"""The narrowest each column may get in one step of shrinking, and whether the step
takes the ``flex`` columns (the last first) or the ``ids`` ones (the widest first)."""


def _shrunk(
    columns: list[Column], shown: list[int], natural: list[int], stages: list[Stage], limit: int
) -> list[int]:
    """The widths of the ``shown`` columns, each stage shrinking its columns toward its
    floors only as far as needed to fit ``limit`` cells."""
    widths = list(natural)

    def excess() -> int:
        return sum(widths[k] for k in shown) + len(GAP) * (len(shown) - 1) - limit

    for floors, flex in stages:
        if flex:
            order = list(reversed([k for k in shown if columns[k].flex]))
        else:
            ids = [k for k in shown if columns[k].ids]
            order = sorted(ids, key=lambda k: floors[k] - widths[k])
        for k in order:
            widths[k] -= max(0, min(widths[k] - floors[k], excess()))
    return widths


def _fits(shown: list[int], widths: list[int], limit: int) -> bool:
    return sum(widths[k] for k in shown) + len(GAP) * (len(shown) - 1) <= limit


def _fit(
    columns: list[Column], rows: list[list[str]], natural: list[int], limit: int
) -> tuple[list[int], list[int]]:
    """The columns shown and their widths on a terminal ``limit`` cells wide: text
    columns shorten to a fair share of the width, then ids to their unique starts, then
    the columns that may drop drop (the highest ``drop`` first), then text columns
    shorten to :data:`MIN_FLEX` and at last to :data:`LEAST_FLEX`."""
    fair = _flex_floors(columns, natural, max(MIN_FLEX, limit // 4))
    first: list[Stage] = [(fair, True), (_id_floors(columns, rows, natural), False)]
    droppable = sorted((k for k, c in enumerate(columns) if c.drop), key=lambda k: -columns[k].drop)
    shown = list(range(len(columns)))
    widths = _shrunk(columns, shown, natural, first, limit)
    for k in droppable:
        if _fits(shown, widths, limit):
            return shown, widths
        shown.remove(k)
        widths = _shrunk(columns, shown, natural, first, limit)
    rest: list[Stage] = [
        (_flex_floors(columns, natural, MIN_FLEX), True),
        (_flex_floors(columns, natural, LEAST_FLEX), True),
    ]
    return shown, _shrunk(columns, shown, widths, rest, limit)


def _cell(column: Column, text: str, size: int, last: bool) -> str:
    if width(text) > size:
        text = cut(text, size, mark="" if column.ids else ELLIPSIS)
    pad = " " * (size - width(text))
    if column.align == "right":
        return pad + text
    return text if last else text + pad


def render(table: Table, limit: int | None) -> tuple[str, list[str]]:
    """The table's title and lines; ``limit`` is the terminal's width (None: no limit,
    nothing shortened)."""
    title, keep = _collapsed(table)
    title = visible(title)
    columns = [table.columns[i] for i in keep]
    rows = [
        [flowing(row[i]) if table.columns[i].flex else visible(row[i]) for i in keep]
        for row in table.rows
    ]
    natural = [max([width(c.header), *(width(r[k]) for r in rows)]) for k, c in enumerate(columns)]
    shown, widths = (
        (list(range(len(columns))), natural)
        if limit is None
        else _fit(columns, rows, natural, limit)
    )
    rules = {k: visible(text) for k, text in table.rules.items()}
    if limit is not None:
        title = cut(title, limit)
        rules = {k: cut(text, limit) for k, text in rules.items()}
    lines = []
    for index, cells in enumerate([[c.header for c in columns], *rows]):
        if index - 1 in rules:
            lines.append(rules[index - 1])
        parts = [_cell(columns[k], cells[k], widths[k], k == shown[-1]) for k in shown]
        lines.append(GAP.join(parts).rstrip())
    if len(rows) in rules:
        lines.append(rules[len(rows)])
    return title, lines


def _terminal() -> bool:
    return sys.stdout.isatty()


def _styled() -> bool:
    return _terminal() and not os.environ.get("NO_COLOR")


def terminal_width() -> int | None:
    """The terminal's width (``COLUMNS`` honoured), or None when stdout is not one."""
    return shutil.get_terminal_size().columns if _terminal() else None


def _wrapped(text: str, limit: int) -> str:
    """Prose broken at spaces into lines of at most ``limit`` cells where it can be (a
    word, an id or a number is never split)."""
    if width(text) <= limit:
        return text
    import textwrap

    indent = text[: len(text) - len(text.lstrip(" "))]
    longest = max(width(word) for word in text.split())
    more = indent + "  " if len(indent) + 2 + longest <= limit else indent
    lines = textwrap.wrap(
        text,
        limit,
        subsequent_indent=more,
        break_long_words=False,
        break_on_hyphens=False,
    )
    return "\n".join(lines)


def echo(text: str = "", *, style: str | None = None, err: bool = False) -> None:
    """Print one line (styled on a terminal), its control characters made visible; on a
    terminal a line too long for it is broken at spaces."""
    stream = sys.stderr if err else sys.stdout
    text = visible(text)
    if stream.isatty():
        text = _wrapped(text, shutil.get_terminal_size().columns)
    if style and stream.isatty() and not os.environ.get("NO_COLOR"):
        from rich.console import Console
        from rich.text import Text

        Console(file=stream, highlight=False, soft_wrap=True).print(Text(text, style=style))
        return
    stream.write(text + "\n")
    stream.flush()


def print_table(table: Table, *, empty: str) -> None:
    """Print ``table`` (or ``empty`` when it has no rows)."""
    if not table.rows:
        echo(empty)
        return
    title, lines = render(table, terminal_width())
    if not _styled():
        sys.stdout.write("\n".join([title, *lines]) + "\n")
        sys.stdout.flush()
        return
    from rich.console import Console
    from rich.text import Text

    console = Console(highlight=False, soft_wrap=True)
    console.print(Text(title, style="bold"))
    console.print(Text(lines[0], style="bold"))
    for line, style in zip(lines[1:], table.line_styles(), strict=True):
        console.print(Text(line, style=style or ""))
