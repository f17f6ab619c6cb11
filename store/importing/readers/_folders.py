"""A source that is one file, or a folder of them: every matching file beneath it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from store.importing.source import Conversation

__all__ = ["each_file"]


def each_file(
    path: Path,
    source: str,
    pattern: str,
    read_file: Callable[[Path, str], Iterator[Conversation]],
) -> Iterator[Conversation]:
    """The conversations ``read_file`` finds in the file ``path``, or in every file
    matching ``pattern`` beneath the folder ``path`` (in path order), each named by the
    source and its path within the folder."""
    if not path.is_dir():
        yield from read_file(path, source)
        return
    for file in sorted(path.rglob(pattern)):
        relative = file.relative_to(path).as_posix()
        yield from read_file(file, f"{source.rstrip('/')}/{relative}")
