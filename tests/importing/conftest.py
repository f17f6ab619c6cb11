"""Fixtures of the import tests: a throwaway PostgreSQL database to read sources from."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy.engine import make_url

from tests.conftest import PgServer, _unique_name
from tests.importing.pg_sources import PASSWORD


@pytest.fixture
def pg_source(pg_server: PgServer) -> Iterator[str]:
    """The URL of an empty throwaway database (created for the test, dropped after it;
    never the database ``test``) on the test server, with a password
    the server never checks (:data:`~tests.importing.pg_sources.PASSWORD`)."""
    name = _unique_name("chatledger_src")
    server_url = pg_server.create(name)
    try:
        yield make_url(server_url).set(password=PASSWORD).render_as_string(hide_password=False)
    finally:
        pg_server.drop_later(name)
