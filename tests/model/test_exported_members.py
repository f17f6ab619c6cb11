"""The public surface is curated: every exported name exists, and imports stay light."""

from __future__ import annotations

import subprocess
import sys

import pytest

import store
import strategies


@pytest.mark.parametrize("package", [store, strategies], ids=lambda p: p.__name__)
def test_every_exported_name_exists_once(package: object) -> None:
    names = list(package.__all__)  # type: ignore[attr-defined]
    assert len(names) == len(set(names))
    missing = [n for n in names if not hasattr(package, n)]
    assert missing == []


def test_public_names_have_docstrings() -> None:
    undocumented = [
        f"{pkg.__name__}.{name}"
        for pkg in (store, strategies)
        for name in pkg.__all__
        if isinstance(getattr(pkg, name), type) and not getattr(pkg, name).__doc__
    ]
    assert undocumented == []


def test_importing_the_library_loads_no_integration_nor_cli() -> None:
    code = (
        "import sys, store, strategies; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('agent_framework', 'typer', "
        "'rich', 'agents', 'langchain_core') "
        "or m.startswith(('store.cli', 'store.integrations'))]; "
        "print(','.join(bad))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout.strip()
    assert out == ""


def test_strategies_never_import_store() -> None:
    code = "import sys, strategies; print(any(m.split('.')[0] == 'store' for m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout.strip()
    assert out == "False"
