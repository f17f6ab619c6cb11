"""Run the real ``chatledger`` console script on a pseudo-terminal of a given size, as a
person at a terminal would: stdout and stderr are the terminal, ``COLUMNS`` is unset,
so the command learns its width from the terminal itself."""

from __future__ import annotations

import errno
import fcntl
import os
import re
import struct
import subprocess
import termios
from collections.abc import Mapping
from dataclasses import dataclass

from tests.cli.helpers import CLEARED_ENV, SCRIPT

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
"""Styles and cursor moves (what rich writes), and terminal titles."""


@dataclass(frozen=True)
class Screen:
    """What one run wrote to the terminal, styles taken out."""

    returncode: int
    lines: list[str]

    @property
    def text(self) -> str:
        """The lines, joined."""
        return "\n".join(self.lines)


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError as error:  # the child closed its side
            if error.errno == errno.EIO:
                break
            raise
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def on_terminal(
    *args: str, columns: int, env: Mapping[str, str] | None = None, timeout: float = 120
) -> Screen:
    """Run ``chatledger ARGS`` with a terminal ``columns`` wide (and 50 rows)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    full_env = {
        k: v
        for k, v in os.environ.items()
        if k not in (*CLEARED_ENV, "COLUMNS", "LINES", "NO_COLOR")
    }
    full_env.update({"TERM": "xterm-256color", **(env or {})})
    try:
        child = subprocess.Popen(
            [str(SCRIPT), *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=full_env,
            close_fds=True,
        )
    finally:
        os.close(slave)
    try:
        raw = _read_all(master)
        code = child.wait(timeout=timeout)
    finally:
        os.close(master)
    text = ANSI.sub("", raw.decode("utf-8", errors="replace")).replace("\r\n", "\n")
    return Screen(code, text.rstrip("\n").split("\n"))
