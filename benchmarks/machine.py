"""What the figures were measured on: cores, load, platform and versions."""

from __future__ import annotations

import os
import platform
import sqlite3
import sys
import time
from importlib import metadata
from typing import Any

__all__ = ["PACKAGES", "machine_info"]

PACKAGES = (
    "chatledger",
    "agent-framework-core",
    "openai-agents",
    "langchain-community",
    "langchain-core",
    "sqlalchemy",
    "aiosqlite",
    "asyncpg",
    "tiktoken",
    "pydantic",
)


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def machine_info() -> dict[str, Any]:
    """A snapshot of the machine, taken now (call it at start and end of a run)."""
    return {
        "time": time.time(),
        "cores": os.cpu_count(),
        "load_average": list(os.getloadavg()),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": sys.version.split()[0],
        "sqlite": sqlite3.sqlite_version,
        "packages": {name: _version(name) for name in PACKAGES},
    }
