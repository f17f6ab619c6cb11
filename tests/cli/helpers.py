"""Run the real ``chatledger`` entry point (in a subprocess, or :func:`store.cli.main` in
this process), and seed databases through the API."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
from collections.abc import Callable, Coroutine, Iterator, Mapping
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from store import HistoryStore
from strategies.messages import FunctionCallContent, FunctionResultContent, Message

T = TypeVar("T")

SCRIPT = Path(sys.executable).with_name("chatledger")
"""The console script pip installed next to the interpreter."""
CLEARED_ENV = ("CHATLEDGER_URL", "CHATLEDGER_TENANT", "CHATLEDGER_DEBUG", "CHATLEDGER_KEY_FILE")


@dataclass(frozen=True)
class Result:
    """What one run of the command printed and returned."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        """Stdout parsed as JSON."""
        return json.loads(self.stdout)


def chatledger(
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    module: bool = False,
    timeout: float = 300,
) -> Result:
    """Run ``chatledger ARGS`` (the console script, or ``python -m store.cli``)."""
    command = [sys.executable, "-m", "store.cli"] if module else [str(SCRIPT)]
    full_env = {k: v for k, v in os.environ.items() if k not in CLEARED_ENV}
    full_env.update({"COLUMNS": "200", "NO_COLOR": "1"})
    full_env.update(env or {})
    done = subprocess.run(
        [*command, *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        timeout=timeout,
        check=False,
    )
    return Result(tuple(args), done.returncode, done.stdout, done.stderr)


@contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    for name in CLEARED_ENV:
        os.environ.pop(name, None)
    os.environ.update(values)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def invoke(*args: str, env: Mapping[str, str] | None = None) -> Result:
    """Run :func:`store.cli.main` (what the console script calls) in this process, with
    stdout and stderr captured: streams that are not a terminal, as in a pipe."""
    from store.cli import main

    out, err = io.StringIO(), io.StringIO()
    code: int | str | None = 0
    with _environment({"NO_COLOR": "1", **(env or {})}), redirect_stdout(out), redirect_stderr(err):
        try:
            main(list(args))
        except SystemExit as exited:
            code = exited.code
    returncode = code if isinstance(code, int) else (0 if code is None else 1)
    return Result(tuple(args), returncode, out.getvalue(), err.getvalue())


def rows(output: str) -> list[list[str]]:
    """The cells of a printed table's rows (the lines after its title and header), split
    on the two-space gap between columns."""
    lines = output.splitlines()
    return [[cell.strip() for cell in line.split("  ") if cell.strip()] for line in lines[2:]]


def assert_one_line_error(result: Result, *, contains: str = "") -> None:
    """A failure: non-zero exit, nothing on stdout, one line on stderr, no traceback."""
    assert result.returncode != 0, result
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("chatledger: error: "), lines[0]
    assert contains.lower() in lines[0].lower(), lines[0]
    assert result.stdout == "", result.stdout


def run_api(url: str, action: Callable[[HistoryStore], Coroutine[Any, Any, T]], **kw: Any) -> T:
    """Open the store on ``url`` and run ``action`` on it, from synchronous test code."""

    async def main() -> T:
        async with HistoryStore.open(url, **kw) as store:
            return await action(store)

    return asyncio.run(main())


def tool_turn(turn: int, size: int) -> list[Message]:
    """A user turn with one tool call, its (large) result, and a text answer."""
    call_id = f"call-{turn}"
    return [
        Message.text_message("user", f"question {turn}"),
        Message(
            role="assistant",
            contents=[FunctionCallContent(call_id=call_id, name="lookup", arguments={"n": turn})],
        ),
        Message(
            role="tool",
            contents=[
                FunctionResultContent(
                    call_id=call_id, result=" ".join(f"row{turn}-{i}" for i in range(size))
                )
            ],
        ),
        Message.text_message("assistant", f"answer {turn}"),
    ]


def conversation(turns: int, *, size: int = 40) -> list[Message]:
    """A system prompt and ``turns`` tool turns."""
    messages = [Message.text_message("system", "You are terse.")]
    for turn in range(1, turns + 1):
        messages.extend(tool_turn(turn, size))
    return messages


def ok(*args: str, env: Mapping[str, str] | None = None) -> Result:
    """Run a command in this process that must succeed, and return what it printed."""
    result = invoke(*args, env=env)
    assert result.returncode == 0, result
    return result


def api(url: str, method: str, *args: Any, tenant: str = "default", **kw: Any) -> Any:
    """What ``HistoryStore.<method>(*args, **kw)`` returns on ``url``."""

    async def call(store: HistoryStore) -> Any:
        return await getattr(store, method)(*args, **kw)

    return run_api(url, call, tenant=tenant)
