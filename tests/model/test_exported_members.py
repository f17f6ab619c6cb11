"""The public surface is curated: every exported name exists, and imports stay light."""

from __future__ import annotations

import importlib
import subprocess
import sys
from types import ModuleType

import pytest

import store
import strategies

PUBLIC_MODULES = (
    "store",
    "store.contract",
    "store.errors",
    "store.models",
    "store.formats",
    "store.provider",
    "store.memory",
    "store.integrations.agent_framework",
    "store.cli",
    "strategies",
    "strategies.base",
    "strategies.bounded",
    "strategies.messages",
    "strategies.tokenizers",
    "strategies.view",
    "strategies.changeset",
    "strategies.groups",
    "strategies.triggers",
)
"""The module paths users import; every other one is private and may change."""


@pytest.mark.parametrize("package", [store, strategies], ids=lambda p: p.__name__)
def test_every_exported_name_exists_once(package: object) -> None:
    names = list(package.__all__)  # type: ignore[attr-defined]
    assert len(names) == len(set(names))
    missing = [n for n in names if not hasattr(package, n)]
    assert missing == []


@pytest.mark.parametrize("package", [store, strategies], ids=lambda p: p.__name__)
def test_all_lists_exactly_the_public_names(package: ModuleType) -> None:
    """httpx's habit: a public name missing from ``__all__`` fails, and so does an
    ``__all__`` entry that is not public (private, or a submodule)."""
    for name in package.__all__:
        getattr(package, name)  # a lazily loaded name is loaded now
    public = {
        name
        for name, value in vars(package).items()
        if not name.startswith("_") and not isinstance(value, ModuleType)
    }
    exported = set(package.__all__)
    assert sorted(public - exported) == [], "public but not in __all__"
    assert sorted(exported - public) == [], "in __all__ but not a public name"
    assert exported <= set(dir(package))


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_public_modules_import_and_export_what_they_list(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(getattr(module, "__all__", ()))
    assert exported, f"{name} lists no __all__"
    assert [n for n in exported if n.startswith("_") or not hasattr(module, n)] == []


def test_store_loads_its_names_lazily_from_where_they_are_defined() -> None:
    code = (
        "import sys, store; heavy = ('sqlalchemy', 'tiktoken', 'pydantic'); "
        "print([m for m in heavy if m in sys.modules]); "
        "from store import HistoryStore; print(HistoryStore.__module__)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout.split()
    assert out == ["[]", "store.sql.store"]
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        store.Nope  # noqa: B018


def test_the_contract_and_the_provider_are_exported() -> None:
    for name in (
        "HistoryBackend",
        "ProviderBackend",
        "DemoBackend",
        "BackendBase",
        "TwoPhaseProvider",
    ):
        assert name in store.__all__


def test_every_error_a_store_call_raises_is_exported() -> None:
    errors = (
        "ChatledgerError",
        "ConcurrentWriteError",
        "CorruptRowError",
        "FormatError",
        "InvalidInput",
        "InvalidSource",
        "MigrationRequired",
        "SessionNotFound",
        "StoreClosed",
        "StoreError",
        "StoreTimeout",
    )
    for name in errors:
        assert name in store.__all__
        assert issubclass(getattr(store, name), store.ChatledgerError)
    assert store.ChatledgerError is strategies.ChatledgerError


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
