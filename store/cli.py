"""The ``chatledger`` command line (placeholder until the provider issue)."""

from __future__ import annotations

import typer

app = typer.Typer(help="chatledger: a persistent chat-history store for LLM agents.")


@app.command()
def version() -> None:
    """Print the installed version."""
    from importlib.metadata import version as _version

    typer.echo(_version("chatledger"))


def main() -> None:
    """Console-script entry point."""
    app()
