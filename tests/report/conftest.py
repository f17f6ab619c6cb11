"""Fixtures of the report tests: a store of each backend, and the demo session in it."""

from __future__ import annotations

from tests.audit.conftest import any_store

__all__ = ["any_store"]
