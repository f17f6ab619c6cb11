"""A source's own compaction, said the way the importer takes it.

A reader of a system that compacts its history (a summary written over earlier
messages, entries the system keeps but never sends) hands the messages over in a
``compacted`` conversation, each carrying the annotations that
:func:`~store.rules.imported.import_changes` turns into one ``import`` event: a summary
names the messages it replaces, a message kept aside is excluded with its reason. So
the imported history holds every message, and its projection is what the source system
would send next.
"""

from __future__ import annotations

from collections.abc import Sequence

from store.formats.agent_framework import AF_ANNOTATIONS_KEY
from strategies.messages import Message

__all__ = ["kept_aside", "summary_over"]


def summary_over(message: Message, replaced: Sequence[str]) -> Message:
    """``message`` as a summary replacing the messages of ids ``replaced`` (as the
    source identifies them): the import excludes their groups under it."""
    metadata = dict(message.metadata)
    metadata[AF_ANNOTATIONS_KEY] = {"_summary_of_message_ids": list(replaced)}
    return message.model_copy(update={"metadata": metadata})


def kept_aside(message: Message, reason: str) -> Message:
    """``message`` excluded by the import with ``reason``: stored, never projected."""
    metadata = dict(message.metadata)
    metadata[AF_ANNOTATIONS_KEY] = {"_excluded": True, "_exclude_reason": reason}
    return message.model_copy(update={"metadata": metadata})
