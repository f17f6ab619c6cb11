"""The layering of ``store/``, read from the imports of its modules (AST, not grep).

- ``store/rules/`` and ``store/search/`` are pure: no SQLAlchemy nor any database
  driver, and neither backend;
- the two backends (``store/sql/``, ``store/memory/``) never import each other;
- only ``store/sql/dialect.py`` tells SQLite from PostgreSQL (the engine module may
  look at a URL's scheme to pick the driver);
- no import circle anywhere under ``store/`` (``TYPE_CHECKING`` imports included);
- the read path (``projection/``, ``history.py``, the audit, the annotation state)
  imports nothing of the write path's ``append/``;
- only ``store/sql/drivers/`` imports a database driver (aiosqlite, asyncpg, ``sqlite3``,
  psycopg), besides the importer's reader of other systems' SQLite files;
- each backend's store is one class on :class:`~store.contract.BackendBase` (and no other
  base), every method defined in that class's own module.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Iterator
from pathlib import Path

import pytest

from store import BackendBase, HistoryStore, InMemoryHistoryStore

ROOT = Path(__file__).resolve().parents[2]
STORE = ROOT / "store"
DRIVERS = ("sqlalchemy", "alembic", "aiosqlite", "asyncpg", "sqlite3", "psycopg", "psycopg2")
DIALECT_NAMES = ("sqlite", "postgresql", "postgres")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.py"))


def _imports(path: Path, module: str | None = None) -> Iterator[str]:
    """Every module ``path`` (the module ``module``) imports, made absolute, those of
    ``TYPE_CHECKING`` blocks and functions included."""
    name = module or _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                yield ".".join([*base, node.module] if node.module else base)
            elif node.module is not None:
                yield node.module


MODULES = {_module_name(path): path for path in _modules(STORE)}


def _edges(path: Path, module: str | None = None) -> set[str]:
    """The modules under ``store/`` that ``path`` imports: ``from package import name``
    is an import of the module ``package.name`` when there is one, else of ``package``."""
    name = module or _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                origin = ".".join([*base, node.module] if node.module else base)
            else:
                origin = node.module or ""
            targets = [
                f"{origin}.{alias.name}" if f"{origin}.{alias.name}" in MODULES else origin
                for alias in node.names
            ]
        else:
            continue
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of ``graph`` with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                component.append(other)
                if other == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_circle_under_store() -> None:
    graph = {name: _edges(path) for name, path in MODULES.items()}
    assert _circles(graph) == []


def test_the_circle_finder_finds_a_circle_through_type_checking(tmp_path: Path) -> None:
    first, second = tmp_path / "first.py", tmp_path / "second.py"
    first.write_text("from store.sql.append import rows\n")
    second.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from store.sql.append.counting import Plan\n"
    )
    graph = {
        "store.sql.append.counting": _edges(first, "store.sql.append.counting"),
        "store.sql.append.rows": _edges(second, "store.sql.append.rows"),
    }
    assert _circles(graph) == [["store.sql.append.counting", "store.sql.append.rows"]]


READ_PATH = (
    STORE / "sql" / "projection",
    STORE / "sql" / "history.py",
    STORE / "sql" / "audit.py",
    STORE / "sql" / "annotation.py",
)


@pytest.mark.parametrize("part", READ_PATH, ids=lambda p: str(p.relative_to(STORE)))
def test_the_read_path_never_imports_the_append_path(part: Path) -> None:
    paths = _modules(part) if part.is_dir() else [part]
    found = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in paths
        for name in _edges(path)
        if name == "store.sql.append" or name.startswith("store.sql.append.")
    ]
    assert found == []


DRIVER_MODULES = ("aiosqlite", "asyncpg", "sqlite3", "psycopg", "psycopg2")
FOREIGN_FILES = frozenset(
    STORE / "importing" / "readers" / name for name in ("_sqlite.py", "_postgres.py")
)
"""Read other systems' databases, SQLite files and PostgreSQL URLs, read-only (never the
store's database)."""


def test_only_the_drivers_import_a_database_driver() -> None:
    drivers = STORE / "sql" / "drivers"
    found = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in [*_modules(STORE), *_modules(ROOT / "migrations")]
        if drivers not in path.parents and path not in FOREIGN_FILES
        for name in _imports(path)
        if name.split(".")[0] in DRIVER_MODULES
    ]
    assert found == []


def _offending(folder: Path, forbidden: tuple[str, ...]) -> list[str]:
    found = []
    for path in _modules(folder):
        for name in _imports(path):
            if any(name == f or name.startswith(f + ".") for f in forbidden):
                found.append(f"{path.relative_to(ROOT)} imports {name}")
    return found


def test_the_import_reader_sees_plain_relative_and_guarded_imports(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import sqlalchemy.orm\n"
        "from typing import TYPE_CHECKING\n"
        "from . import sibling\n"
        "from ..sql.store import HistoryStore\n"
        "if TYPE_CHECKING:\n"
        "    from store.memory import InMemoryHistoryStore\n"
        "def later():\n"
        "    import asyncpg\n"
    )
    found = set(_imports(probe, "store.rules.probe"))
    assert found == {
        "sqlalchemy.orm",
        "typing",
        "store.rules",
        "store.sql.store",
        "store.memory",
        "asyncpg",
    }


def test_rules_import_no_database_library_and_no_backend() -> None:
    assert _offending(STORE / "rules", (*DRIVERS, "store.sql", "store.memory")) == []


def test_search_rules_import_no_database_library_and_no_backend() -> None:
    assert _offending(STORE / "search", (*DRIVERS, "store.sql", "store.memory")) == []


def test_rules_and_models_stay_pure() -> None:
    pure = [STORE / "contract.py", STORE / "models.py", STORE / "errors.py"]
    found = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in pure
        for name in _imports(path)
        if name.split(".")[0] in DRIVERS or name.startswith(("store.sql", "store.memory"))
    ]
    assert found == []


@pytest.mark.parametrize(
    ("backend", "other"), [("memory", "store.sql"), ("sql", "store.memory")], ids=["memory", "sql"]
)
def test_backends_never_import_each_other(backend: str, other: str) -> None:
    assert _offending(STORE / backend, (other,)) == []


def _dialect_tests(path: Path) -> Iterator[str]:
    """Places where ``path`` looks at which database it talks to."""
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "name"
            and (
                (isinstance(node.value, ast.Attribute) and node.value.attr == "dialect")
                or (isinstance(node.value, ast.Name) and node.value.id == "dialect")
            )
        ):
            yield f"line {node.lineno}: .dialect.name"
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("get_backend_name", "get_dialect"):
                yield f"line {node.lineno}: {node.func.attr}()"
        elif isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                if isinstance(side, ast.Constant) and side.value in DIALECT_NAMES:
                    yield f"line {node.lineno}: compared with {side.value!r}"


def test_only_the_dialect_module_tells_the_databases_apart() -> None:
    allowed = {STORE / "sql" / "dialect.py", STORE / "sql" / "drivers" / "engine.py"}
    found = [
        f"{path.relative_to(ROOT)} {where}"
        for path in [*_modules(STORE), *_modules(ROOT / "migrations")]
        if path not in allowed
        for where in _dialect_tests(path)
    ]
    assert found == []


def test_the_engine_looks_only_at_url_schemes() -> None:
    engine = STORE / "sql" / "drivers" / "engine.py"
    assert [w for w in _dialect_tests(engine) if ".dialect.name" in w] == []


def test_the_dialect_check_finds_what_it_looks_for(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "def f(conn, url):\n"
        "    a = conn.dialect.name == 'x'\n"
        "    b = url.get_backend_name()\n"
        "    return 'sqlite' == a\n"
    )
    assert len(list(_dialect_tests(probe))) == 3


@pytest.mark.parametrize("cls", [HistoryStore, InMemoryHistoryStore], ids=lambda c: c.__name__)
def test_each_store_is_one_class_in_one_module(cls: type) -> None:
    assert cls.__mro__ == (cls, BackendBase, object), "BackendBase alone: no other base or mixin"
    elsewhere = [
        name
        for name, member in vars(cls).items()
        if inspect.isfunction(inspect.unwrap(getattr(member, "__func__", member)))
        and inspect.unwrap(getattr(member, "__func__", member)).__module__ != cls.__module__
    ]
    assert elsewhere == []
    tree = ast.parse(Path(inspect.getfile(cls)).read_text())
    [node] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls.__name__]
    defined = {n.name for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    methods = {
        name
        for name, member in vars(cls).items()
        if inspect.isfunction(getattr(member, "__func__", member)) or isinstance(member, property)
    }
    assert methods <= defined
