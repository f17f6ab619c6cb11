"""The exceptions chatledger raises, one tree for both packages::

    ChatledgerError                       the root (defined in strategies.errors)
    ├── SessionNotFound (LookupError)     the session does not exist (for this tenant)
    ├── ConcurrentWriteError              a write kept conflicting with other writers
    │   ├── StoreTimeout                  a call waited for a lock past the store's timeout
    │   └── RecordConflict                a conditional append found another record revision
    ├── CorruptRowError                   a stored row failed to validate (tenant, session, seq)
    ├── EncryptionError                   a key or a tenant's encryption refuses the call
    │   ├── KeyRequired                   an encrypted tenant, opened without a key
    │   ├── WrongKey                      the key given cannot unwrap the tenant's data key
    │   ├── InvalidKey (ValueError)       a key file or key that cannot be used (names why)
    │   └── PlaintextRows                 an encrypted store, a tenant not yet encrypted
    ├── MigrationRequired                 the schema is behind: run ``chatledger db upgrade``
    ├── InvalidInput (ValueError)         the caller's input is invalid (ids, options, ...)
    │   ├── InvalidSource                 an import source cannot be read (file, line or row)
    │   └── MissingSessionId              an agent framework called without a session id
    ├── StoreClosed                       the store was closed (``aclose``); open another
    ├── StoreError                        any other database failure (connection refused, ...)
    ├── FormatError (ValueError)          a converter cannot read an item (names its index)
    ├── RecordError (ValueError)          an export's chatledger record cannot be read or
    │                                     no longer matches its document
    ├── CliError                          a command failed: one line on stderr, an exit code
    ├── MissingResult (RuntimeError)      the demo's model met a call without its result
    │
    │   raised by the strategies (the store translates these two to InvalidInput):
    ├── TokenizerMismatch (ValueError)    a strategy's tokenizer is not the view's
    ├── InvalidStrategySpec (ValueError)  a strategy spec cannot be read or built
    │
    │   raised by the tools around a model call (tokenizers, bounded results, fakes):
    ├── UnknownTokenizer (ValueError)     no shipped tokenizer has that name
    ├── VocabularyIntegrityError (RuntimeError)   a shipped vocabulary is damaged
    ├── InvalidCursor (ValueError)        a page cursor that is malformed, forged or stale
    ├── ResultBudgetError (ValueError)    a budget that cannot hold even the notice
    └── FakeSummarizerError (RuntimeError)        the fake summarizer failing on purpose

Each keeps the built-in base that says what kind of failure it is, so ``except
ValueError`` still catches bad input. :class:`ChatledgerError`, the store's errors and
:class:`~store.formats.FormatError` are importable from :mod:`store`; the strategies'
from :mod:`strategies`, :class:`~store.integrations.agent_framework.MissingSessionId`,
:class:`~store.demo.MissingResult` and the CLI's ``CliError`` (which never leaves the
command line) from their modules.

Callers never see a driver's exception: the SQL backend translates what the database
reports at its boundary (:mod:`store.sql.errors`), and both backends translate a
strategy's :class:`~strategies.base.TokenizerMismatch` and
:class:`~strategies.specs.InvalidStrategySpec` with :func:`strategy_errors`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from strategies.errors import ChatledgerError

__all__ = [
    "ChatledgerError",
    "ConcurrentWriteError",
    "CorruptRowError",
    "EncryptionError",
    "InvalidInput",
    "InvalidKey",
    "InvalidSource",
    "KeyRequired",
    "MigrationRequired",
    "PlaintextRows",
    "RecordConflict",
    "SessionNotFound",
    "StoreClosed",
    "StoreError",
    "StoreTimeout",
    "WrongKey",
    "strategy_errors",
]


class SessionNotFound(ChatledgerError, LookupError):
    """The session does not exist for the store's tenant."""

    def __init__(self, session_id: str, *, tenant: str) -> None:
        super().__init__(f"session {session_id!r} not found (tenant {tenant!r})")
        self.session_id = session_id
        self.tenant = tenant


class ConcurrentWriteError(ChatledgerError):
    """A write conflicted with other writers more often than the retry budget allows."""


class StoreTimeout(ConcurrentWriteError):
    """A call waited for a lock (another writer, a transaction left open) longer than the
    store's ``timeout``; nothing of it was written."""


class RecordConflict(ConcurrentWriteError):
    """A conditional append (:meth:`~store.contract.HistoryBackend.append_if`) found the
    session's record at another revision than the one it expected; nothing of it was
    written."""

    def __init__(
        self, session_id: str, *, tenant: str, expected: str | None, found: str | None
    ) -> None:
        super().__init__(
            f"session {session_id!r} (tenant {tenant!r}) holds record revision {found!r}, "
            f"not {expected!r}: it was written since it was read"
        )
        self.session_id = session_id
        self.tenant = tenant
        self.expected = expected
        """The revision the write expected (None: no record)."""
        self.found = found
        """The revision stored (None: no record)."""


class StoreClosed(ChatledgerError):
    """The store was closed with ``aclose()``: every later call raises this."""


class CorruptRowError(ChatledgerError):
    """A stored row failed to validate; it is reported, never skipped."""

    def __init__(self, message: str, *, tenant: str, session_id: str, seq: int | None) -> None:
        where = f"tenant {tenant!r}, session {session_id!r}"
        if seq is not None:
            where += f", seq {seq}"
        super().__init__(f"corrupt row ({where}): {message}")
        self.tenant = tenant
        self.session_id = session_id
        self.seq = seq


class EncryptionError(ChatledgerError):
    """Encryption at rest refuses the call: a key is missing or wrong, or the tenant's
    state does not allow it (``docs/encryption.md``)."""


class KeyRequired(EncryptionError):
    """The tenant is encrypted and the store was opened without a key
    (``encryption=KeyRing(...)``, or ``--key-file`` on the command line)."""


class WrongKey(EncryptionError):
    """The key given cannot unwrap the tenant's data key (another key file, a key id the
    provider does not hold, or a damaged wrapped key)."""


class InvalidKey(EncryptionError, ValueError):
    """A key file or a key that cannot be used: unreadable, malformed, a key of the wrong
    size, or a key file the group or others may read (the message says which)."""


class PlaintextRows(EncryptionError):
    """A store opened with encryption on a tenant whose rows are still in clear: run
    ``chatledger encrypt --tenant T`` first."""


class MigrationRequired(ChatledgerError):
    """The database schema is not at the version this library needs."""


class InvalidInput(ChatledgerError, ValueError):
    """The caller's input cannot be stored as given."""


class InvalidSource(InvalidInput):
    """An import source that cannot be read: the message names the source, the line or
    row, and the reason."""

    def __init__(self, source: str, where: str | None, reason: str) -> None:
        self.source = source
        """The file or database."""
        self.where = where
        """The line, row or item (``line 3``), when the problem has one."""
        self.reason = reason
        """What is wrong."""
        place = f"{source}: {where}" if where else source
        super().__init__(f"{place}: {reason}")


class StoreError(ChatledgerError):
    """A database failure that no more specific error describes."""


@contextmanager
def strategy_errors() -> Iterator[None]:
    """Re-raise a strategy's :class:`~strategies.base.TokenizerMismatch` (its tokenizer is
    not the one the store counted with) and a bad strategy spec
    (:class:`~strategies.specs.InvalidStrategySpec`) as :class:`InvalidInput`."""
    try:
        yield
    except ChatledgerError as error:
        # imported on this path only: importing the errors loads no strategy
        from strategies.base import TokenizerMismatch
        from strategies.specs import InvalidStrategySpec

        if isinstance(error, TokenizerMismatch | InvalidStrategySpec):
            raise InvalidInput(str(error)) from error
        raise
