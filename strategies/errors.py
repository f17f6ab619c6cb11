"""The root of chatledger's exceptions, shared by both packages.

Every error :mod:`strategies` and :mod:`store` raise on purpose derives from
:class:`ChatledgerError`, and keeps the built-in base that says what kind of failure it
is (a :class:`ValueError` for input that cannot be used, a :class:`RuntimeError` for a
broken installation or a failing fake): ``except ChatledgerError`` catches every one of
them, ``except ValueError`` still catches the bad-input ones. :mod:`store.errors` draws
the whole tree and re-exports this class.
"""

from __future__ import annotations

__all__ = ["ChatledgerError"]


class ChatledgerError(Exception):
    """Root of every error chatledger raises."""
