"""Run chatledger's command line in a process that kills itself with SIGKILL at a chosen
point of its work: the crash of a machine or an OOM kill, at a place the test picks.

``python -m tests.reliability.killing PATTERN NTH WHERE BATCH ARGS...`` runs ``chatledger
ARGS...`` (:func:`store.cli.main`) with a listener on every SQLAlchemy engine, and with
``BATCH`` messages a write of an import (:data:`store.importing.write.BATCH`; ``0``
keeps the default), so that a small source takes several writes. The
``NTH`` statement whose SQL matches the regular expression ``PATTERN`` (case folded)
arms it; ``WHERE`` says when it fires:

* ``statement``: at once, before that statement reaches the database;
* ``commit``: at the next commit of a transaction, before the commit reaches the
  database (the transaction's writes are all sent, none is durable);
* ``commit:K``: at the ``K``-th commit from there (the ``K - 1`` before it are durable).

A process that ends without firing exits with :data:`NOT_KILLED` (:data:`FAILED` when
the command failed), so that a test can tell a kill point that was never reached from
one that was.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

ROOT = Path(__file__).resolve().parents[2]
NOT_KILLED = 97
"""The exit code of a child that finished without reaching its kill point."""
FAILED = 98
"""The exit code of a child whose command failed before reaching its kill point."""

Where = Literal["statement", "commit"] | str
"""``statement``, ``commit`` or ``commit:K``."""


def _die() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def install(pattern: str, nth: int, where: Where) -> None:
    """Listen to every engine of this process and kill it at the chosen point."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    matcher = re.compile(pattern, re.IGNORECASE)
    commits = int(where.partition(":")[2] or 1)
    state = {"seen": 0, "armed": False, "commits": 0}

    def before(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        if matcher.search(statement) is None:
            return
        state["seen"] += 1
        if state["seen"] == nth:
            if where == "statement":
                _die()
            state["armed"] = True

    def on_commit(_conn: Any) -> None:
        if state["armed"]:
            state["commits"] += 1
            if state["commits"] == commits:
                _die()

    event.listen(Engine, "before_cursor_execute", before)
    event.listen(Engine, "commit", on_commit)


WRITE = r"^(INSERT|UPDATE|DELETE|CREATE|ALTER|DROP)\b"
"""The first write of a command: what :func:`run_killed_at_each_commit` arms at."""


def _spawn(
    pattern: str, nth: int, where: Where, args: tuple[str, ...], batch: int, timeout: float
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATLEDGER_")}
    command = [sys.executable, "-m", "tests.reliability.killing", pattern, str(nth), where]
    return subprocess.run(
        [*command, str(batch), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_killed(
    pattern: str, nth: int, where: Where, *args: str, batch: int = 0, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run ``chatledger ARGS`` in a child killed at the chosen point; fail unless it was."""
    done = _spawn(pattern, nth, where, args, batch, timeout)
    if done.returncode != -signal.SIGKILL:
        raise AssertionError(
            f"chatledger {' '.join(args)} was not killed at the {nth}th {pattern!r} "
            f"(exit {done.returncode}): {done.stderr.strip()[-500:]}"
        )
    return done


def run_killed_at_each_commit(
    *args: str, check: Callable[[int], None], limit: int = 10, timeout: float = 120
) -> int:
    """Run ``chatledger ARGS`` killed at the first commit after its first write, call
    ``check(1)``; then killed at the second commit, ``check(2)``; and so on, until a run
    reaches its end without being killed: that one must succeed, and it finishes the
    work. Return how many runs were killed."""
    for commit in range(1, limit + 1):
        done = _spawn(WRITE, 1, f"commit:{commit}", args, 0, timeout)
        if done.returncode == -signal.SIGKILL:
            check(commit)
            continue
        if done.returncode != NOT_KILLED:
            raise AssertionError(
                f"chatledger {' '.join(args)} failed after {commit - 1} kills "
                f"(exit {done.returncode}): {done.stderr.strip()[-500:]}"
            )
        return commit - 1
    raise AssertionError(f"chatledger {' '.join(args)} committed more than {limit} times")


def main() -> None:
    pattern, nth, where, batch, *args = sys.argv[1:]
    if where != "statement" and not re.fullmatch(r"commit(:[1-9][0-9]*)?", where):
        raise SystemExit(f"unknown kill point {where!r}")
    install(pattern, int(nth), where)
    from store.cli import main as chatledger
    from store.importing import write

    if int(batch):
        write.BATCH = int(batch)

    try:
        chatledger(args)
    except SystemExit as exited:
        os._exit(NOT_KILLED if exited.code in (0, None) else FAILED)
    os._exit(NOT_KILLED)


if __name__ == "__main__":
    main()
