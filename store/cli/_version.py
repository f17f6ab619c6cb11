"""The installed chatledger's version, for ``chatledger version`` and ``--version``.

It is read from the ``Version:`` field of the distribution's ``METADATA``, in the first
``chatledger-*.dist-info`` folder on :data:`sys.path` (where :mod:`importlib.metadata`
finds it), without importing :mod:`importlib.metadata` and the e-mail parser it loads,
which would double the command's start. When no such folder holds a version (an egg, a
zipped install), :mod:`importlib.metadata` answers.
"""

from __future__ import annotations

import os
import sys

__all__ = ["installed_version"]

DISTRIBUTION = "chatledger"


def _dist_info_folders() -> list[str]:
    """The ``chatledger-*.dist-info`` folders on :data:`sys.path`, in its order."""
    found: list[str] = []
    for folder in sys.path:
        try:
            names = sorted(os.listdir(folder or "."))
        except OSError:  # not a folder (a zip file), or gone
            continue
        found.extend(
            os.path.join(folder or ".", name)
            for name in names
            if name.lower().startswith(f"{DISTRIBUTION}-") and name.endswith(".dist-info")
        )
    return found


def _metadata_version(folder: str) -> str | None:
    """The ``Version:`` header of ``folder``'s ``METADATA`` (None when it has none)."""
    try:
        with open(os.path.join(folder, "METADATA"), encoding="utf-8") as metadata:
            for line in metadata:
                if not line.strip():  # the headers end here
                    return None
                if line.startswith("Version:"):
                    return line.removeprefix("Version:").strip() or None
    except OSError:
        return None
    return None


def installed_version() -> str:
    """The version pip installed (``"unknown (not installed)"`` in a bare checkout)."""
    for folder in _dist_info_folders():
        found = _metadata_version(folder)
        if found is not None:
            return found
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:  # pragma: no cover - a checkout without metadata
        return "unknown (not installed)"
