"""Fixtures of the reliability tests: one store of each backend (memory, SQLite, PostgreSQL)."""

from __future__ import annotations

from tests.audit.conftest import any_store

__all__ = ["any_store"]
