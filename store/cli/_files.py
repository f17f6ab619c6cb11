"""The files the commands write: default names made from ids, and output written whole
or not at all.

A default file name never lets an id pick the folder: an id of letters, digits, ``.``,
``_`` and ``-`` (not starting with a dot) is the name as it is; any other id (an ADK
session ``app/user/id``, ``../x``, ``/abs/x``) keeps those characters, has every other
one written ``_``, and gets a short hash of the whole id, so that two ids never share a
name. Every failure to write a file is one line naming it and the problem.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from pathlib import Path
from types import TracebackType

from store.cli._common import CliError

__all__ = ["OutputFile", "default_file_name"]

_SAFE = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_NAME_LENGTH = 255
"""The longest file name most file systems take (in bytes; safe names are ASCII)."""
_REDUCED_LENGTH = 100
"""Characters of a reduced id kept before its hash."""


def default_file_name(identifier: str, suffix: str) -> str:
    """The name of the file for ``identifier`` in the current folder: ``identifier``
    plus ``suffix`` when the id is safe as a name, else the id reduced to safe
    characters, a hash of it and ``suffix``."""
    if _SAFE.fullmatch(identifier) and len(identifier) + len(suffix) <= _NAME_LENGTH:
        return identifier + suffix
    reduced = _UNSAFE.sub("_", identifier).lstrip(".")[:_REDUCED_LENGTH] or "session"
    digest = hashlib.sha256(identifier.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{reduced}-{digest}{suffix}"


def _refusal(target: Path, problem: str) -> CliError:
    return CliError(f"cannot write {str(target)!r}: {problem}")


class OutputFile:
    """Text written to ``target`` whole or not at all: into a temporary file beside it,
    renamed over it by :meth:`commit`, removed when the block fails.

    Every failure of the file (a missing folder, no permission, a full disk) is a
    :class:`~store.cli._common.CliError` naming ``target``, never the temporary file.
    """

    def __init__(self, target: Path) -> None:
        self.target = target
        """The file to write."""
        folder = target.parent
        if not folder.is_dir():
            problem = "not a folder" if folder.exists() else "no folder"
            raise _refusal(target, f"{problem} {str(folder)!r}")
        try:
            handle, name = tempfile.mkstemp(dir=folder, prefix=f".{target.name}.")
        except OSError as error:
            raise _refusal(target, error.strerror or str(error)) from None
        self._temporary = Path(name)
        self._stream = os.fdopen(handle, "w", encoding="utf-8")

    def write(self, text: str) -> None:
        """Append ``text``."""
        try:
            self._stream.write(text)
        except OSError as error:
            raise _refusal(self.target, error.strerror or str(error)) from None

    def commit(self) -> None:
        """Put the written text in place of ``target``."""
        try:
            self._stream.close()
            os.replace(self._temporary, self.target)
        except OSError as error:
            self._temporary.unlink(missing_ok=True)
            raise _refusal(self.target, error.strerror or str(error)) from None

    def __enter__(self) -> OutputFile:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if kind is None:
            self.commit()
            return
        self._stream.close()
        self._temporary.unlink(missing_ok=True)
