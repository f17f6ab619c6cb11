"""Encryption at rest on the command line: ``chatledger keys new|rotate|events`` and
``chatledger encrypt``.

``keys new`` writes a local key file (:func:`store.encryption.local.new_key_file`) and
opens no database. The others work on a database with the key ring of ``--key-file``
(or ``$CHATLEDGER_KEY_FILE``), which ``rotate`` and ``encrypt`` require. ``encrypt`` and
``rotate`` rewrite rows in batches and record what they did as a key event (``keys
events`` lists them); an interrupted run is continued by running it again. On a
terminal their progress is drawn on stderr.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import click

from store.cli._common import (
    CliError,
    emit_json,
    encryption_option_value,
    json_option,
    run,
    tenant_option,
    url_option,
)
from store.cli._output import Column, Table, echo, number, print_table, quantity, when

if TYPE_CHECKING:
    from store.encryption import KeyEvent, KeyRing

__all__ = ["encrypt", "keys"]

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_BATCH = 500
"""Rows rewritten a transaction, unless ``--batch`` says otherwise."""


def batch_option(function: F) -> F:
    """``--batch N``: rows rewritten a transaction."""
    return click.option(
        "--batch",
        type=click.IntRange(min=1),
        default=DEFAULT_BATCH,
        show_default=True,
        metavar="N",
        help="Rows rewritten a transaction (a smaller batch holds its locks for less time).",
    )(function)


class _Progress:
    """The ``progress(done, total)`` of a rewrite: remembered, to say how far an
    interrupted run got, and drawn as a bar on stderr when stderr is a terminal."""

    def __init__(self, show: Callable[[int, int | None], None] | None) -> None:
        self.show = show
        self.done = 0

    def __call__(self, done: int, total: int) -> None:
        self.done = done
        if self.show is not None:
            self.show(done, total)


@contextmanager
def _progress(label: str) -> Iterator[_Progress]:
    if not sys.stderr.isatty():
        yield _Progress(None)
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, console=Console(file=sys.stderr), transient=True) as bar:
        task = bar.add_task(label, total=None)

        def draw(done: int, total: int | None) -> None:
            bar.update(task, completed=done, total=total)

        yield _Progress(draw)


def _rewrite(label: str, job: Callable[[_Progress], Any]) -> KeyEvent:
    """Run a rewrite (``job`` given its progress) to its end; interrupted, say how far
    it got and that running it again continues."""
    with _progress(label) as progress:
        try:
            event: KeyEvent = run(job(progress))
        except KeyboardInterrupt:
            raise CliError(
                f"interrupted after {quantity(progress.done, 'row')}: run the same command "
                "again to continue",
                exit_code=130,
            ) from None
    return event


@click.group()
def keys() -> None:
    """Make key files, rotate keys, list key events (encryption at rest)."""


@keys.command("new")
@click.argument("path", metavar="PATH", type=click.Path(dir_okay=False))
@click.option(
    "--add", is_flag=True, help="Add a new current key to an existing key file, keeping its keys."
)
@json_option
def new(path: str, add: bool, as_json: bool) -> None:
    """Write a new key file (mode 0600), or add a key to one; print the key's id.

    A new file refuses to replace an existing one. With --add the new key becomes the
    current one and the older keys stay, so what they wrapped still opens: then run
    `chatledger keys rotate --kek` to rewrap every data key under the new key.
    """
    from store.encryption.local import new_key_file

    key_id = new_key_file(path, add=add)
    if as_json:
        emit_json({"key_id": key_id, "path": path, "added": add})
        return
    echo(key_id)


@keys.command("rotate")
@click.option("--kek", is_flag=True, help="Rewrap every data key under the key file's current key.")
@click.option(
    "--tenant",
    metavar="NAME",
    help="Give the tenant a new data key and rewrite its rows under it.",
)
@batch_option
@url_option
@json_option
def rotate(kek: bool, tenant: str | None, batch: int, url: str | None, as_json: bool) -> None:
    """Rotate a key: the key-encryption key (--kek) or a tenant's data key (--tenant).

    --kek rewraps the data keys only (no row is rewritten): add a key to the key file
    first (`chatledger keys new PATH --add`). --tenant rewrites the tenant's rows in
    batches; interrupted, running it again continues.
    """
    if kek == (tenant is not None):
        raise CliError("pass exactly one of --kek and --tenant NAME", exit_code=2)
    ring = _required_ring()
    if tenant is None:
        from store.encryption import rotate_kek

        event = _rewrite("rewrapping", lambda p: rotate_kek(url, encryption=ring, progress=p))
    else:
        from store.encryption import rotate_tenant_key

        event = _rewrite(
            f"rotating {tenant}",
            lambda p: rotate_tenant_key(
                url, tenant=tenant, encryption=ring, batch_size=batch, progress=p
            ),
        )
    _report(event, as_json)


@keys.command("events")
@click.option("--tenant", metavar="NAME", help="This tenant's events only (default: all).")
@url_option
@json_option
def events(tenant: str | None, url: str | None, as_json: bool) -> None:
    """List key events: encryptions and rotations, running or done, oldest first."""
    from store.encryption import key_events

    found: list[KeyEvent] = run(key_events(url, tenant=tenant))
    if as_json:
        emit_json(found)
        return
    print_table(_events_table(found), empty="No key events.")


@click.command()
@tenant_option
@batch_option
@url_option
@json_option
def encrypt(tenant: str, batch: int, url: str | None, as_json: bool) -> None:
    """Encrypt a tenant's stored rows with a new data key (resumable).

    Rows are rewritten in batches, each in its own transaction; interrupted, running
    the same command again continues where it stopped. Needs --key-file.
    """
    ring = _required_ring()
    from store.encryption import encrypt_tenant

    event = _rewrite(
        f"encrypting {tenant}",
        lambda p: encrypt_tenant(url, tenant=tenant, encryption=ring, batch_size=batch, progress=p),
    )
    _report(event, as_json)


def _required_ring() -> KeyRing:
    """The key ring of ``--key-file``, which the command needs (a usage error without)."""
    ring = encryption_option_value(required=True)
    if ring is None:  # pragma: no cover - required raises first
        raise CliError("a key file is needed", exit_code=2)
    return ring


def _report(event: KeyEvent, as_json: bool) -> None:
    if as_json:
        emit_json(event)
        return
    echo(_sentence(event))


def _sentence(event: KeyEvent) -> str:
    """What a finished rewrite did, in one line."""
    rows = quantity(event.rows, "row")
    if event.kind == "rotate_kek":
        return f"rewrapped {quantity(event.rows, 'key')} under key {event.key_id}"
    verb = "encrypted" if event.kind == "encrypt" else "rewrote"
    return (
        f"tenant {event.tenant}: {verb} {rows} under data key {event.data_key_id} "
        f"(wrapped under key {event.key_id}); event {event.event_id}"
    )


def _events_table(found: list[KeyEvent]) -> Table:
    table = Table(
        "Key events",
        [
            Column("event", ids=True),
            Column("tenant", constant=True),
            Column("kind"),
            Column("state"),
            Column("started", drop=2),
            Column("finished", drop=1),
            Column("rows", align="right"),
            Column("key", ids=True),
            Column("data key", ids=True, drop=3),
        ],
    )
    for event in found:
        done = number(event.rows)
        table.add(
            event.event_id,
            event.tenant or "-",
            event.kind,
            event.state,
            when(event.started_at),
            when(event.finished_at),
            done if event.total is None else f"{done}/{number(event.total)}",
            event.key_id or "-",
            event.data_key_id or "-",
            style="yellow" if event.state == "running" else None,
        )
    return table
