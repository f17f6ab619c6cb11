"""``chatledger search``: the tenant's messages (or a session's) that match a query."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from store.cli._common import emit_json, json_option, tenant_option, url_option, with_store
from store.cli._output import echo, terminal_width
from store.cli._prefix import unique_lengths
from store.cli._visible import visible
from store.cli._width import cut, width

if TYPE_CHECKING:
    from store.contract import HistoryBackend
    from store.models import SearchHit, SearchPage

__all__ = ["hit_line", "search"]


def hit_line(hit: SearchHit) -> str:
    """One hit on one line (piped output), its fields tab-separated: session, message
    id, seq, role, state, snippet (control characters made visible in each)."""
    state = f"excluded by {hit.excluded_by}" if hit.excluded else "active"
    fields = (hit.session_id, hit.message_id, str(hit.seq), hit.role, state, hit.snippet)
    return "\t".join(visible(field) for field in fields)


def _heading(hit: SearchHit, lengths: dict[str, int], columns: int) -> tuple[str, str]:
    """A hit's heading (where it is) and its state, fitting ``columns``: whole ids when
    they fit, else each a unique start of itself (as tables show them), the role and
    the event left out last."""
    state = f"excluded by {hit.excluded_by}" if hit.excluded else ""
    session, message = hit.session_id, hit.message_id
    short = (session[: lengths[session]], message[: lengths[message]])
    for ids, role, said in (
        ((session, message), hit.role, state),
        (short, hit.role, state),
        (short, "", state),
        (short, "", "excluded" if hit.excluded else ""),
    ):
        where = "  ".join(p for p in (*ids, f"seq {hit.seq}", role) if p)
        line = f"{where}  {said}" if said else where
        if width(line) <= columns:
            return where, said
    return cut(where, columns), ""


def _print_styled(page: SearchPage) -> None:
    """On a terminal: a heading line a hit, then its snippet with the matches in bold."""
    from rich.console import Console
    from rich.text import Text

    columns = terminal_width() or 80
    ids = [i for h in page.hits for i in (h.session_id, h.message_id)]
    lengths = unique_lengths(ids)
    console = Console(highlight=False, width=columns)
    for hit in page.hits:
        where, state = _heading(hit, lengths, columns)
        heading = Text(where, "bold")
        if state:
            heading.append(f"  {state}", style="yellow")
        console.print(heading)
        snippet = Text("  " + visible(hit.snippet))
        for start, end in hit.highlights:
            snippet.stylize("bold reverse", start + 2, end + 2)
        console.print(snippet)


@click.command()
@click.argument("query")
@click.option("--session", "session_id", metavar="SESSION", help="Search this session only.")
@click.option("--excluded-only", is_flag=True, help="Only messages compaction excluded.")
@click.option(
    "--role",
    "roles",
    multiple=True,
    metavar="ROLE",
    help="Only messages of this role (repeat for several).",
)
@click.option(
    "--limit",
    type=click.IntRange(1, 500),
    default=20,
    show_default=True,
    help="The most hits shown.",
)
@url_option
@tenant_option
@json_option
def search(
    query: str,
    session_id: str | None,
    excluded_only: bool,
    roles: tuple[str, ...],
    limit: int,
    url: str | None,
    tenant: str,
    as_json: bool,
) -> None:
    """Search stored messages: words (all must match), "quoted phrases", prefix*.

    Case and diacritics do not matter, and Chinese or Japanese words are found inside
    unspaced text. Best matches first; piped, one tab-separated line a hit: session,
    message id, seq, role, state, snippet.
    """

    async def action(store: HistoryBackend) -> SearchPage:
        return await store.search(
            query,
            session_id=session_id,
            excluded_only=excluded_only,
            roles=roles or None,
            limit=limit,
        )

    page = with_store(url, tenant, action)
    if as_json:
        emit_json(page)
        return
    if not page.hits:
        echo(f"no message matches {query!r}.")
        return
    if sys.stdout.isatty():
        _print_styled(page)
    else:
        sys.stdout.write("".join(hit_line(hit) + "\n" for hit in page.hits))
        sys.stdout.flush()
    if page.next_cursor is not None:
        echo(f"more than {limit} hits: raise --limit to see more", err=True)
