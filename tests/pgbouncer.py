"""A PgBouncer of the test run, in front of the test PostgreSQL server.

Debian's ``pgbouncer`` (``$CHATLEDGER_TEST_PGBOUNCER``, else ``pgbouncer`` on the
``PATH``, else ``/usr/sbin/pgbouncer``) started on a free local port with its default
settings but for what a test run must say: where to listen, the server behind it
(``* = host=... port=...``, every database by its own name), trust authentication of the
server URL's user, and the pool mode. It runs as ``nobody`` when the tests run as root
(PgBouncer refuses to run as root). Without the program the tests that need it are
skipped, unless ``CHATLEDGER_REQUIRE_PGBOUNCER=1``, which turns that into a failure.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

BINARY_ENV = "CHATLEDGER_TEST_PGBOUNCER"
REQUIRE_ENV = "CHATLEDGER_REQUIRE_PGBOUNCER"
DEBIAN_BINARY = "/usr/sbin/pgbouncer"
STARTUP_SECONDS = 15.0
"""How long PgBouncer may take to listen (it listens within milliseconds)."""


def _unavailable(reason: str) -> None:
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"PgBouncer is required ({REQUIRE_ENV}=1) but {reason}")
    pytest.skip(f"PgBouncer unavailable: {reason}")


def _binary() -> str:
    found = os.environ.get(BINARY_ENV) or shutil.which("pgbouncer") or DEBIAN_BINARY
    if not os.access(found, os.X_OK):
        _unavailable(f"{found} is not installed (Debian: apt-get install pgbouncer)")
    return found


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class Pgbouncer:
    """A running PgBouncer: URLs through it, and :meth:`close`."""

    mode: str
    """``transaction`` or ``session``."""
    server_url: str
    """The server's URL (its database is replaced by :meth:`url_for`'s)."""
    port: int
    folder: Path
    process: subprocess.Popen[bytes]

    def url_for(self, database: str, *, option: str | None = None) -> str:
        """A ``postgresql://`` URL of ``database`` through this PgBouncer (with the
        URL option ``pooler=option`` when given)."""
        parsed = make_url(self.server_url).set(
            drivername="postgresql", host="127.0.0.1", port=self.port, database=database
        )
        if option is not None:
            parsed = parsed.update_query_dict({"pooler": option})
        return parsed.render_as_string(hide_password=False)

    def log(self) -> str:
        """What PgBouncer wrote so far."""
        return (self.folder / "pgbouncer.log").read_text(errors="replace")

    def close(self) -> None:
        """Stop PgBouncer and remove its files."""
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


def start(server_url: str, mode: str) -> Pgbouncer:
    """Start PgBouncer in ``mode`` in front of the server of ``server_url``."""
    binary = _binary()
    server = make_url(server_url)
    user = server.username or "postgres"
    password = server.password or ""
    folder = Path(tempfile.mkdtemp(prefix="chatledger-pgbouncer-"))
    folder.chmod(0o755)  # readable by the user PgBouncer runs as
    port = _free_port()
    (folder / "users.txt").write_text(f'"{user}" "{password}"\n')
    (folder / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"* = host={server.host or '127.0.0.1'} port={server.port or 5432}\n"
        "[pgbouncer]\n"
        "listen_addr = 127.0.0.1\n"
        f"listen_port = {port}\n"
        "unix_socket_dir =\n"
        "auth_type = trust\n"
        f"auth_file = {folder / 'users.txt'}\n"
        f"pool_mode = {mode}\n"
    )
    for name in ("users.txt", "pgbouncer.ini"):
        (folder / name).chmod(0o644)
    command = [binary, str(folder / "pgbouncer.ini")]
    if os.geteuid() == 0:
        command[1:1] = ["-u", "nobody"]
    with (folder / "pgbouncer.log").open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    bouncer = Pgbouncer(mode, server_url, port, folder, process)
    deadline = time.monotonic() + STARTUP_SECONDS
    while True:
        if process.poll() is not None:
            log_text = bouncer.log()
            bouncer.close()
            _unavailable(f"{binary} exited with {process.returncode}: {log_text.strip()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return bouncer
        except OSError:
            if time.monotonic() > deadline:
                bouncer.close()
                _unavailable(f"{binary} did not listen on port {port}: {bouncer.log().strip()}")
            time.sleep(0.05)
