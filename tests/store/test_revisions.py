"""The revisions read from the version scripts' source agree with Alembic's own reading,
so that the check on open can do without Alembic."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory

from store.errors import MigrationRequired
from store.sql.migrations import revisions
from store.sql.migrations.migrator import alembic_config, is_backward_compatible
from store.sql.migrations.revisions import (
    ShippedRevision,
    head_revisions,
    known_revisions,
    revision_history,
    shipped_revisions,
)


def _alembic_scripts() -> ScriptDirectory:
    return ScriptDirectory.from_config(alembic_config())


def _as_tuple(down_revision: str | Sequence[str] | None) -> tuple[str, ...]:
    if isinstance(down_revision, str):
        return (down_revision,)
    return tuple(down_revision or ())


def test_the_shipped_revisions_are_alembics_oldest_first() -> None:
    scripts = list(reversed(list(_alembic_scripts().walk_revisions())))
    assert shipped_revisions() == tuple(
        ShippedRevision(
            revision=s.revision,
            down_revisions=_as_tuple(s.down_revision),
            backward_compatible=is_backward_compatible(s),
            description=(s.doc or "").strip().splitlines()[0] if s.doc else "",
        )
        for s in scripts
    )


def test_heads_and_known_revisions_are_alembics() -> None:
    scripts = _alembic_scripts()
    assert head_revisions() == tuple(scripts.get_heads())
    assert known_revisions() == {s.revision for s in scripts.walk_revisions()}


def test_the_history_is_what_alembic_lists() -> None:
    assert revision_history() == [
        {
            "revision": s.revision,
            "down_revision": str(s.down_revision) if s.down_revision else None,
            "description": (s.doc or "").strip().splitlines()[0] if s.doc else "",
        }
        for s in reversed(list(_alembic_scripts().walk_revisions()))
    ]


def _script(directory: Path, name: str, body: str) -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(body))
    return path


def test_a_script_is_read_whichever_way_it_assigns(tmp_path: Path) -> None:
    plain = _script(
        tmp_path,
        "a.py",
        '''
        """Merge two branches.

        Revision ID: m1
        """
        revision = "m1"
        down_revision = ("b1", "b2")
        backward_compatible = True
        ''',
    )
    annotated = _script(
        tmp_path,
        "b.py",
        """
        revision: str = "b1"
        down_revision: str | None = None
        backward_compatible: bool = False
        """,
    )
    assert revisions._read_script(plain) == ShippedRevision(
        "m1", ("b1", "b2"), True, "Merge two branches."
    )
    assert revisions._read_script(annotated) == ShippedRevision("b1", (), False, "")


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("down_revision = None\n", "declares no revision id"),
        ("revision = make_id()\n", "not literal"),
        ("revision = 'x'\ndown_revision = 3\n", "down_revision is 3"),
        ("revision = (\n", "cannot read"),
    ],
)
def test_a_script_that_cannot_be_read_is_refused(tmp_path: Path, body: str, problem: str) -> None:
    with pytest.raises(MigrationRequired, match=problem):
        revisions._read_script(_script(tmp_path, "bad.py", body))


def test_revisions_are_ordered_after_their_parents_and_a_missing_parent_is_refused() -> None:
    def rev(name: str, *parents: str) -> ShippedRevision:
        return ShippedRevision(name, parents, False, "")

    ordered = revisions._oldest_first([rev("c", "a", "b"), rev("b", "a"), rev("a")])
    assert [r.revision for r in ordered] == ["a", "b", "c"]
    with pytest.raises(MigrationRequired, match=r"parents that do not ship: \['gone'\]"):
        revisions._oldest_first([rev("a"), rev("b", "gone")])
    with pytest.raises(MigrationRequired, match="a cycle"):
        revisions._oldest_first([rev("a"), rev("b", "c"), rev("c", "b")])
