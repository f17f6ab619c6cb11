"""The schema revisions this library ships, and the rule that says whether it can use a
database at a given revision; without Alembic.

Opening a store compares the revision the database records with the newest one shipped
here (:func:`check_revisions`). That comparison needs only each version script's
``revision``, ``down_revision`` and backward-compatibility marker, which this module
reads from the scripts' source with :mod:`ast` (:func:`shipped_revisions`), so that
Alembic loads only when a schema is created, upgraded or downgraded
(:mod:`store.sql.migrations.migrator`). A test keeps this reading in step with Alembic's own.

The scripts ship inside the wheel as ``store/_migrations`` (found with
:mod:`importlib.resources`); in a source checkout (editable install) the repository's
``migrations/`` directory is used instead.

A rolling deploy runs two releases against one database: the newer one upgrades it,
the older one must keep working. Each revision script says whether it allows that with
a module attribute, the *marker*::

    backward_compatible: bool = True  # the previous head's code keeps working on this one

(absent means False). The marker only helps a process that can read it, and that
process lacks the newer script, so the migration environment records every applied
revision, its parent and its marker in ``chatledger_schema_revisions``
(:func:`store.sql.migrations.migrator.record_step`). A database at a revision this library does
not ship is then accepted when a chain of revisions marked backward-compatible leads
from it down to this library's head (:func:`compatible_ahead`); otherwise it is refused
as made by a newer chatledger.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from store.errors import MigrationRequired

__all__ = [
    "MARKER",
    "Mark",
    "Marks",
    "ShippedRevision",
    "check_revisions",
    "compatible_ahead",
    "head_revisions",
    "incompatible_between",
    "known_revisions",
    "revision_history",
    "script_location",
    "shipped_revisions",
    "unknown_revisions",
]

MARKER = "backward_compatible"
"""The name of a revision script's backward-compatibility marker (a module attribute)."""
_READ = ("revision", "down_revision", MARKER)
"""The module attributes read from each version script."""


def script_location() -> Path:
    """Where the Alembic scripts are: the packaged copy, else the repository's."""
    packaged = resources.files("store").joinpath("_migrations")
    if packaged.is_dir() and packaged.joinpath("env.py").is_file():
        return Path(str(packaged))
    repository = Path(__file__).resolve().parents[3] / "migrations"
    if (repository / "env.py").is_file():
        return repository
    raise MigrationRequired("chatledger's migration scripts are missing from the installation")


@dataclass(frozen=True)
class ShippedRevision:
    """One version script this library ships, as its source declares it."""

    revision: str
    """The revision id."""
    down_revisions: tuple[str, ...]
    """Its parents: none for the first revision, two or more for a merge."""
    backward_compatible: bool
    """Its marker: whether the previous head's code keeps working on this revision."""
    description: str
    """The first line of the script's docstring."""


def _assignment(node: ast.stmt) -> tuple[str, ast.expr] | None:
    """The name and value of a module-level ``name = value`` or ``name: T = value``."""
    target: ast.expr
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target, value = node.targets[0], node.value
    elif isinstance(node, ast.AnnAssign) and node.value is not None:
        target, value = node.target, node.value
    else:
        return None
    return (target.id, value) if isinstance(target, ast.Name) else None


def _script_values(path: Path) -> tuple[dict[str, object], str]:
    """The module-level values of :data:`_READ` a script assigns, and its docstring."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, UnicodeDecodeError, SyntaxError) as error:
        raise MigrationRequired(f"cannot read the migration script {path}: {error}") from error
    values: dict[str, object] = {}
    for name, value in filter(None, map(_assignment, tree.body)):
        if name not in _READ:
            continue
        try:
            values[name] = ast.literal_eval(value)
        except ValueError as error:
            raise MigrationRequired(
                f"the migration script {path} sets {name} to something not literal"
            ) from error
    doc = (ast.get_docstring(tree) or "").strip()
    return values, doc.splitlines()[0] if doc else ""


def _parents(down_revision: object) -> tuple[str, ...]:
    """A script's ``down_revision`` (none, one id, or a sequence of ids) as a tuple."""
    if down_revision is None:
        return ()
    if isinstance(down_revision, str):
        return (down_revision,)
    if isinstance(down_revision, tuple | list):
        return tuple(str(d) for d in down_revision)
    raise MigrationRequired(f"a migration script's down_revision is {down_revision!r}")


def _read_script(path: Path) -> ShippedRevision:
    values, description = _script_values(path)
    revision = values.get("revision")
    if not isinstance(revision, str):
        raise MigrationRequired(f"the migration script {path} declares no revision id")
    return ShippedRevision(
        revision=revision,
        down_revisions=_parents(values.get("down_revision")),
        backward_compatible=values.get(MARKER) is True,
        description=description,
    )


def _oldest_first(scripts: list[ShippedRevision]) -> tuple[ShippedRevision, ...]:
    """``scripts`` with every revision after its parents (ties by revision id)."""
    done: dict[str, ShippedRevision] = {}
    waiting = sorted(scripts, key=lambda s: s.revision)
    while waiting:
        ready = [s for s in waiting if all(p in done for p in s.down_revisions)]
        if not ready:
            named = {p for s in waiting for p in s.down_revisions}
            missing = sorted(named - set(done) - {s.revision for s in waiting})
            problem = f"parents that do not ship: {missing}" if missing else "a cycle"
            raise MigrationRequired(f"chatledger's migration scripts name {problem}")
        done.update((s.revision, s) for s in ready)
        waiting = [s for s in waiting if s.revision not in done]
    return tuple(done.values())


@functools.cache
def shipped_revisions() -> tuple[ShippedRevision, ...]:
    """Every revision this library ships, oldest first, read from the version scripts
    (every ``.py`` file of ``versions/``, as Alembic finds them)."""
    versions = script_location() / "versions"
    paths = sorted(p for p in versions.glob("*.py") if not p.name.startswith(("__init__", ".#")))
    return _oldest_first([_read_script(p) for p in paths])


@functools.cache
def head_revisions() -> tuple[str, ...]:
    """The newest revision(s) this library ships."""
    parents = {p for s in shipped_revisions() for p in s.down_revisions}
    return tuple(s.revision for s in reversed(shipped_revisions()) if s.revision not in parents)


@functools.cache
def known_revisions() -> frozenset[str]:
    """Every revision this library ships."""
    return frozenset(s.revision for s in shipped_revisions())


def incompatible_between(current: tuple[str, ...], target: str = "head") -> list[str]:
    """The shipped revisions after ``current`` up to ``target`` (``head``: the newest)
    that are not backward compatible: a process of an earlier release cannot use the
    database once they are applied. None for a database without a schema (``current``
    empty): nothing ran against it before."""
    if not current:
        return []
    order = [s.revision for s in shipped_revisions()]
    marks = {s.revision: s.backward_compatible for s in shipped_revisions()}
    start = max((order.index(r) for r in current if r in marks), default=-1)
    end = len(order) - 1 if target == "head" else order.index(target) if target in marks else -1
    return [r for r in order[start + 1 : end + 1] if not marks[r]]


def revision_history() -> list[dict[str, str | None]]:
    """The revisions this version ships, oldest first: id, parent and description."""
    return [
        {
            "revision": s.revision,
            "down_revision": ", ".join(s.down_revisions) or None,
            "description": s.description,
        }
        for s in shipped_revisions()
    ]


@dataclass(frozen=True)
class Mark:
    """What the database records of one applied revision."""

    down_revision: str | None
    backward_compatible: bool


Marks = dict[str, Mark]
"""Applied revisions' records, by revision."""


def compatible_ahead(revision: str, marks: Marks) -> bool:
    """Whether this library keeps working against a database at ``revision``, which it
    does not ship: a chain of revisions marked backward-compatible leads from it down to
    this library's head."""
    seen: set[str] = set()
    while revision not in known_revisions():
        mark = marks.get(revision)
        if mark is None or not mark.backward_compatible or mark.down_revision is None:
            return False
        if revision in seen:
            return False
        seen.add(revision)
        revision = mark.down_revision
    return revision in head_revisions()


def unknown_revisions(current: tuple[str, ...]) -> list[str]:
    """The revisions of ``current`` this library does not ship."""
    return [r for r in current if r not in known_revisions()]


def check_revisions(
    current: tuple[str, ...], where: str, *, create: bool, marks: Marks | None = None
) -> bool:
    """Whether a database at ``current`` needs migrating; refuse what this library cannot
    use: no schema when nothing may be created, or a revision it does not know (a newer
    chatledger made the database) unless ``marks`` show it backward-compatible with
    this library's head (:func:`compatible_ahead`), in which case nothing is migrated."""
    unknown = unknown_revisions(current)
    if unknown and all(compatible_ahead(r, marks or {}) for r in unknown):
        return False
    if unknown:
        raise MigrationRequired(
            f"the database at {where} was created by a newer chatledger (revision "
            f"{', '.join(unknown)}); upgrade the package (pip install -U chatledger)"
        )
    if not current and not create:
        raise MigrationRequired(
            f"no chatledger schema in {where}: run `chatledger db upgrade` to create it"
        )
    return set(current) != set(head_revisions())
