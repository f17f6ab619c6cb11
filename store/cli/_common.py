"""What every command shares: the common options, opening the store, errors, JSON.

Commands print tables for people (:mod:`store.cli._output`), or with ``--json`` the API's
models as JSON on stdout: an array for a listing, an object for one result (the shapes
are in ``docs/cli.md``). Failures are :class:`CliError` (or a
:class:`~store.errors.ChatledgerError`), turned into one line on stderr and exit code 1
by :func:`store.cli.main`; usage errors exit 2.

Nothing heavy is imported here: the store, SQLAlchemy and the tokenizers load inside
the commands that need them, so that ``--help`` and ``--version`` start fast.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Awaitable, Callable, Coroutine
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import click

from store.errors import ChatledgerError

if TYPE_CHECKING:
    from pydantic import BaseModel

    from store.contract import HistoryBackend, UpkeepBackend
    from store.usage import ModelPrice
    from strategies.tokenizers import Tokenizer

__all__ = [
    "TENANT_ENV",
    "URL_ENV",
    "CliError",
    "DeferredTokenizer",
    "confirm",
    "emit_json",
    "json_option",
    "open_store",
    "parse_since",
    "prices_option_value",
    "run",
    "session_tokenizer",
    "strategy_option_value",
    "tenant_option",
    "tokenizer_option_value",
    "upkeep",
    "url_option",
    "with_store",
    "yes_option",
]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

TENANT_ENV = "CHATLEDGER_TENANT"
URL_ENV = "CHATLEDGER_URL"


class CliError(ChatledgerError):
    """A failure to report as one line, with ``exit_code`` (2 for usage errors)."""

    def __init__(self, message: str, *, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def url_option(function: F) -> F:
    """``--url``: the database (a URL or a SQLite file's path)."""
    return click.option(
        "--url",
        envvar=URL_ENV,
        metavar="URL",
        help="Database: sqlite:///PATH, postgresql://USER@HOST/DB, or a SQLite file's path "
        f"(default ${URL_ENV}, else ./chatledger.db).",
    )(function)


def tenant_option(function: F) -> F:
    """``--tenant``: whose sessions the command reads or changes."""
    return click.option(
        "--tenant",
        envvar=TENANT_ENV,
        default="default",
        show_default=True,
        metavar="NAME",
        help=f"The tenant (also ${TENANT_ENV}).",
    )(function)


def json_option(function: F) -> F:
    """``--json``: print the API's models instead of a table."""
    return click.option(
        "--json", "as_json", is_flag=True, help="Print JSON instead of a table (docs/cli.md)."
    )(function)


def yes_option(function: F) -> F:
    """``--yes``: do what the command would ask to confirm, without asking."""
    ask = "Do not ask (needed when not on a terminal)."
    return click.option("--yes", is_flag=True, help=ask)(function)


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Drive one of the async store's coroutines to completion."""
    import asyncio  # here, not for a command's help

    return asyncio.run(coroutine)


async def open_store(
    url: str | None, tenant: str, action: Callable[[HistoryBackend], Awaitable[T]], **options: Any
) -> T:
    """Open the store on an existing database (nothing is created or written by opening
    it: a database without chatledger's schema is refused), run ``action``, close it."""
    from store.sql.store import HistoryStore

    async with HistoryStore.open(url, tenant=tenant, create=False, **options) as store:
        return await action(store)


def upkeep(store: HistoryBackend) -> UpkeepBackend:
    """The store's upkeep ability (``doctor``, ``vacuum``): :class:`CliError` when it has
    none."""
    from store.contract import is_upkeep_backend

    if not is_upkeep_backend(store):
        raise CliError(f"{type(store).__name__} cannot check, repair or vacuum its storage")
    return store


def with_store(
    url: str | None, tenant: str, action: Callable[[HistoryBackend], Awaitable[T]], **options: Any
) -> T:
    """:func:`open_store`, run to completion."""
    return run(open_store(url, tenant, action, **options))


def session_tokenizer(url: str | None, tenant: str, session_id: str) -> Tokenizer:
    """The tokenizer the session was counted with, so that any session can be read
    (:class:`CliError` when it is not one that ships with chatledger)."""

    async def action(store: HistoryBackend) -> str:
        return (await store.session(session_id)).tokenizer

    name = with_store(url, tenant, action)
    from strategies.tokenizers import tokenizer_named
    from strategies.tokenizers.bpe import SUPPORTED_ENCODINGS

    if name in SUPPORTED_ENCODINGS:
        return DeferredTokenizer(name)
    try:
        return tokenizer_named(name)
    except ValueError:
        raise CliError(
            f"session {session_id!r} was counted with tokenizer {name!r}, which does not ship "
            "with chatledger: pass --tokenizer NAME"
        ) from None


class DeferredTokenizer:
    """A shipped tiktoken encoding, known by name and loaded on its first count: a
    command that reads a session without counting (``show``) never loads tiktoken."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._loaded: Tokenizer | None = None

    @property
    def name(self) -> str:
        """The encoding's name, as the session records it."""
        return self._name

    def count_tokens(self, text: str) -> int:
        """Count with the encoding (loading it the first time)."""
        if self._loaded is None:
            from strategies.tokenizers import TiktokenTokenizer

            self._loaded = TiktokenTokenizer(self._name)
        return self._loaded.count_tokens(text)


def tokenizer_option_value(name: str) -> Tokenizer:
    """The tokenizer a ``--tokenizer NAME`` option names (a usage error when unknown)."""
    from strategies.tokenizers import tokenizer_named

    try:
        return tokenizer_named(name)
    except ValueError as error:
        raise CliError(f"invalid --tokenizer: {error}", exit_code=2) from None


def prices_option_value(path: str | None) -> dict[str, ModelPrice] | None:
    """The prices of a ``--prices FILE`` option (TOML or JSON, ``docs/cli.md``), read
    before any database is opened (a usage error, in one line, when they cannot be
    read); None without the option."""
    if path is None:
        return None
    from store.errors import InvalidInput
    from store.usage import load_prices

    try:
        return load_prices(path)
    except InvalidInput as error:
        raise CliError(f"invalid --prices: {error}", exit_code=2) from None


def strategy_option_value(spec: str) -> str:
    """A ``--strategy SPEC`` option's spec, checked before any database is opened (a
    usage error when it does not parse)."""
    from strategies.specs import InvalidStrategySpec, parse_strategy

    try:
        parse_strategy(spec)
    except InvalidStrategySpec as error:
        raise CliError(f"invalid --strategy: {error}", exit_code=2) from None
    return spec


def emit_json(value: BaseModel | list[Any] | dict[str, Any] | None) -> None:
    """Print ``value`` (a model, a list of models, or plain JSON) as JSON on stdout: the
    exact values, with every control character escaped (:func:`~store.cli._visible.json_safe`)."""
    from store.cli._visible import json_safe

    sys.stdout.write(json_safe(json.dumps(_plain(value), indent=2, ensure_ascii=False)) + "\n")
    sys.stdout.flush()


def _plain(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def confirm(question: str, *, yes: bool) -> None:
    """Go on when ``yes`` was given, or a person on a terminal says yes; without a
    terminal and without ``--yes``, refuse (a usage error: exit 2)."""
    if yes:
        return
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise CliError(f"{question}: not on a terminal, pass --yes to confirm", exit_code=2)
    from store.cli._visible import visible

    if not click.confirm(visible(question), default=False):
        raise CliError("not confirmed: nothing changed")


_RELATIVE = re.compile(r"^(\d+)\s*([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_since(value: str, *, now: datetime | None = None) -> datetime:
    """An ISO 8601 date or time (UTC when naive), or an age such as ``30m``, ``2h``, ``7d``."""
    text = value.strip()
    match = _RELATIVE.match(text)
    if match:
        delta = timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
        return (now or datetime.now(UTC)) - delta
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise CliError(
            f"invalid --since {value!r}: expected an ISO date/time or an age like 30m, 2h, 7d",
            exit_code=2,
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
