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
    from store.encryption import KeyRing
    from store.usage import ModelPrice
    from strategies.tokenizers import Tokenizer

__all__ = [
    "KEY_FILE_ENV",
    "TENANT_ENV",
    "URL_ENV",
    "CliError",
    "DeferredTokenizer",
    "confirm",
    "emit_json",
    "encryption_option_value",
    "encryption_options",
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
KEY_FILE_ENV = "CHATLEDGER_KEY_FILE"

_KEY_FILE = "chatledger.key_file"
_KEY_RING = "chatledger.key_ring"
"""Where ``--key-file`` keeps its path, and the key ring read from it, in the command's
``click.Context.meta`` (shared by a group and its commands)."""


class CliError(ChatledgerError):
    """A failure to report as one line, with ``exit_code`` (2 for usage errors)."""

    def __init__(self, message: str, *, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def url_option(function: F) -> F:
    """``--url``: the database (a URL or a SQLite file's path), and ``--key-file``: the
    key that opens its encrypted tenants. Every command that takes a database takes its
    key with it, so that an encrypted tenant reads with every command; the key file is
    kept in the context (:func:`encryption_option_value` reads it), not passed to the
    command."""
    with_key = click.option(
        "--key-file",
        envvar=KEY_FILE_ENV,
        metavar="PATH",
        expose_value=False,
        callback=_remember_key_file,
        help=f"Key file of the encrypted tenants (default ${KEY_FILE_ENV}; docs/encryption.md).",
    )(function)
    return click.option(
        "--url",
        envvar=URL_ENV,
        metavar="URL",
        help="Database: sqlite:///PATH, postgresql://USER@HOST/DB, or a SQLite file's path "
        f"(default ${URL_ENV}, else ./chatledger.db).",
    )(with_key)


def _remember_key_file(ctx: click.Context, _: click.Parameter, value: str | None) -> None:
    if value:  # an empty $CHATLEDGER_KEY_FILE is no key file
        ctx.meta[_KEY_FILE] = value


def encryption_option_value(*, required: bool = False) -> KeyRing | None:
    """The key ring of the command's ``--key-file`` (or ``$CHATLEDGER_KEY_FILE``), read
    once a command: None without one, unless ``required`` (a usage error then). A key
    file that cannot be used is a usage error, in one line, before any database opens."""
    ctx = click.get_current_context(silent=True)
    meta: dict[str, Any] = {} if ctx is None else ctx.meta
    path = meta.get(_KEY_FILE)
    if path is None:
        if required:
            raise CliError(
                f"a key file is needed: pass --key-file PATH or set ${KEY_FILE_ENV}", exit_code=2
            )
        return None
    if _KEY_RING not in meta:
        meta[_KEY_RING] = _key_ring(path)
    ring: KeyRing = meta[_KEY_RING]
    return ring


def _key_ring(path: str) -> KeyRing:
    """The key ring of the local key file at ``path``."""
    try:
        from store.encryption.local import LocalKeyProvider
    except ImportError as error:
        raise CliError(str(error)) from None
    from store.errors import InvalidKey

    try:
        provider = LocalKeyProvider.from_file(path)
    except InvalidKey as error:
        raise CliError(f"invalid --key-file: {error}", exit_code=2) from None
    from store.encryption import KeyRing

    ring: KeyRing = KeyRing(provider)
    return ring


def encryption_options() -> dict[str, Any]:
    """The keywords that give ``HistoryStore.open`` the command's key ring: none without
    a key file, so that a database is opened exactly as before."""
    ring = encryption_option_value()
    return {} if ring is None else {"encryption": ring}


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
    it: a database without chatledger's schema is refused), with the command's key ring
    (:func:`encryption_options`), run ``action``, close it."""
    from store.sql.store import HistoryStore

    keywords = {**encryption_options(), **options}
    async with HistoryStore.open(url, tenant=tenant, create=False, **keywords) as store:
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
