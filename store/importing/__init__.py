"""Importing chat logs of other systems: files, folders and databases, in every format
of :data:`FORMATS`.

:func:`import_sources` validates every source completely, then writes (both passes
stream), idempotently: the same sources imported again, or copies of them, store
nothing; its :class:`ImportReport` counts only what was stored. A session's identity is
its source system and the source's own id (:func:`session_id_for` and
:func:`message_id_for` name what a source leaves without one). :func:`detect_format`
tells a source's format from its content. The format ids are shared with
:mod:`store.exporting` and the command line.
"""

from store.importing.detect import detect_format
from store.importing.readers import READERS
from store.importing.report import ImportReport, SkippedSource
from store.importing.run import import_sources, message_id_for, session_id_for

__all__ = [
    "FORMATS",
    "ImportReport",
    "SkippedSource",
    "detect_format",
    "import_sources",
    "message_id_for",
    "session_id_for",
]

FORMATS: tuple[str, ...] = tuple(READERS)
"""The format ids that can be imported."""
