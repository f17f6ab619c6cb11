"""``chatledger export``: sessions out, in the formats ``chatledger import`` reads.

The export streams to stdout (with every control character escaped as JSON allows, so
that a terminal shows it and a reader parses the same values), or to ``-o FILE``, which
is written whole or not at all (a temporary file beside it, renamed once complete); a
file that cannot be written is one line naming it and why.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Protocol

import click

from store.cli._common import CliError, encryption_options, run, tenant_option, url_option
from store.cli._files import OutputFile
from store.cli._visible import json_safe

__all__ = ["export"]


class _Writable(Protocol):
    def write(self, text: str, /) -> object: ...


class _Escaping:
    """Standard output, which may be a terminal: the JSON written with every control
    character that JSON leaves raw escaped (:func:`~store.cli._visible.json_safe`), so
    that it reads back to the same values and sends nothing to a terminal."""

    def __init__(self, stream: _Writable) -> None:
        self._stream = stream

    def write(self, text: str, /) -> object:
        return self._stream.write(json_safe(text))


@click.command()
@click.argument("session_ids", nargs=-1, required=True, metavar="SESSION...")
@click.option("--format", "fmt", required=True, metavar="ID", help="The output format.")
@click.option("--context", is_flag=True, help="Export what the model is sent next.")
@click.option("--strategy", "spec", metavar="SPEC", help="With --context: project with it.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write to FILE.")
@click.option(
    "--no-record",
    "plain",
    is_flag=True,
    help="Leave out chatledger's record of each session: the target's messages only "
    "(importing them again stores the sessions again).",
)
@url_option
@tenant_option
def export(
    session_ids: tuple[str, ...],
    fmt: str,
    context: bool,
    spec: str | None,
    output: str | None,
    plain: bool,
    url: str | None,
    tenant: str,
) -> None:
    """Export sessions: jsonl, openai-chat, openai-responses, anthropic, langchain,
    pydantic-ai, vercel-ai or agent-framework (docs/importing.md gives each shape)."""
    from store.exporting import EXPORT_FORMATS, export_sessions
    from store.sql.store import HistoryStore

    if fmt not in EXPORT_FORMATS:
        raise CliError(
            f"invalid --format {fmt!r} (one of {', '.join(EXPORT_FORMATS)})", exit_code=2
        )
    if spec is not None and not context:
        raise CliError("--strategy needs --context", exit_code=2)

    async def write(stream: _Writable) -> None:
        from store.cli._ids import session_id

        keys = encryption_options()
        async with HistoryStore.open(url, tenant=tenant, create=False, **keys) as store:
            chosen = [await session_id(store, typed) for typed in session_ids]
            chunks = export_sessions(
                store,
                chosen,
                format=fmt,
                context=context,
                strategy=spec,
                record=not plain,
            )
            async for chunk in chunks:
                stream.write(chunk)

    if output is None:
        run(write(_Escaping(sys.stdout)))
        sys.stdout.flush()
        return
    with OutputFile(Path(output)) as stream:
        run(write(stream))
