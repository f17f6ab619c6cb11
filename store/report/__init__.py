"""The visual audit: one self-contained HTML page per session.

:func:`build_report` reads a session from any backend (:mod:`store.report.timeline`)
and renders the page (:mod:`store.report.page`, with its token chart in
:mod:`store.report.chart`); :func:`write_report` writes it to a file, whole or not at
all. ``chatledger report SESSION [-o FILE] [--prices FILE]`` is the command line's face
of it.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Mapping
from pathlib import Path

from store.contract import HistoryBackend
from store.errors import InvalidInput
from store.report.page import render
from store.report.timeline import collect
from store.usage import ModelPrice

__all__ = ["build_report", "write_report"]


async def build_report(
    store: HistoryBackend, session_id: str, *, prices: Mapping[str, ModelPrice] | None = None
) -> str:
    """The audit page of ``session_id`` (:class:`~store.errors.SessionNotFound` when it
    does not exist), its model calls priced with ``prices`` (``{model: ModelPrice}``,
    :func:`store.usage.load_prices`) when given."""
    return render(await collect(store, session_id, prices=prices))


async def write_report(
    store: HistoryBackend,
    session_id: str,
    path: str | Path,
    *,
    prices: Mapping[str, ModelPrice] | None = None,
) -> Path:
    """Write the audit page of ``session_id`` to ``path`` (replaced atomically: a reader
    never sees half a page) and return the path."""
    page = await build_report(store, session_id, prices=prices)
    return await asyncio.to_thread(_write, Path(path), page)


def _write(target: Path, page: str) -> Path:
    folder = target.parent
    if not folder.is_dir():
        raise InvalidInput(f"cannot write {str(target)!r}: no folder {str(folder)!r}")
    temporary = folder / f".{target.name}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        with temporary.open("x", encoding="utf-8") as out:  # the umask's mode, as any file
            out.write(page)
        os.replace(temporary, target)
    except OSError as error:
        Path(temporary).unlink(missing_ok=True)
        raise InvalidInput(f"cannot write {str(target)!r}: {error.strerror}") from None
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target
