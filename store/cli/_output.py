"""Printing for people: aligned columns that never split an id or a number.

A :class:`Table` is columns of text cells. Every column keeps its cells whole except
the one ``flex`` column (content, reasons), which is shortened with an ellipsis to fit
a terminal's width; ids, numbers and times are never cut nor wrapped. When stdout is
not a terminal nothing is shortened or wrapped: each row is one line, whatever its
length, so that piped output can be searched and copied as it is. Columns marked
``constant`` are left out when every row has the same value, which the title states
once instead. A rule is a line of its own between rows, outside the columns (where a
fork's own messages start).

On a terminal the header is bold and rows may carry a style (rich); elsewhere, or with
``NO_COLOR``, the text is plain. Every cell, title and line goes out through
:mod:`store.cli._visible`: a control character of stored text is shown as an escape
(``\\x1b``), never sent; the ``flex`` column's line breaks and tabs are spaces.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from store.cli._visible import flowing, visible

__all__ = ["Column", "Table", "echo", "number", "print_table", "render", "when"]

ELLIPSIS = "…"
MIN_FLEX = 12
"""The narrowest a shortened ``flex`` column gets."""
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


def _shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + ELLIPSIS


def render(table: Table, width: int | None) -> tuple[str, list[str]]:
    """The table's title and lines; ``width`` is the terminal's (None: no limit)."""
    title, keep = _collapsed(table)
    title = visible(title)
    columns = [table.columns[i] for i in keep]
    rows = [
        [flowing(row[i]) if table.columns[i].flex else visible(row[i]) for i in keep]
        for row in table.rows
    ]
    widths = [max([len(c.header), *(len(r[k]) for r in rows)]) for k, c in enumerate(columns)]
    flex = next((k for k, c in enumerate(columns) if c.flex), None)
    if width is not None and flex is not None:
        fixed = sum(w for k, w in enumerate(widths) if k != flex) + len(GAP) * (len(widths) - 1)
        widths[flex] = max(min(widths[flex], width - fixed), min(widths[flex], MIN_FLEX))
    lines = []
    for index, cells in enumerate([[c.header for c in columns], *rows]):
        if index - 1 in table.rules:
            lines.append(visible(table.rules[index - 1]))
        parts = []
        for k, (column, cell) in enumerate(zip(columns, cells, strict=True)):
            text = _shorten(cell, widths[k]) if k == flex else cell
            last = k == len(columns) - 1
            if column.align == "right":
                parts.append(text.rjust(widths[k]))
            else:
                parts.append(text if last else text.ljust(widths[k]))
        lines.append(GAP.join(parts).rstrip())
    if len(rows) in table.rules:
        lines.append(visible(table.rules[len(rows)]))
    return title, lines


def _terminal() -> bool:
    return sys.stdout.isatty()


def _styled() -> bool:
    return _terminal() and not os.environ.get("NO_COLOR")


def terminal_width() -> int | None:
    """The terminal's width (``COLUMNS`` honoured), or None when stdout is not one."""
    return shutil.get_terminal_size().columns if _terminal() else None


def echo(text: str = "", *, style: str | None = None, err: bool = False) -> None:
    """Print one line (styled on a terminal), its control characters made visible."""
    stream = sys.stderr if err else sys.stdout
    text = visible(text)
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
