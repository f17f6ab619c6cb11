"""The paths through a tree of messages (``store.importing.readers._tree``): the current
path first, every other branch after the branch it leaves, through the newest children,
and trees that cannot be walked refused."""

from __future__ import annotations

import pytest

from store.importing.readers._tree import Branch, TreeError, branches

#   r ── a ─┬─ b ── c          current: c
#           └─ d ─┬─ e
#                 └─ f         (f is d's newest child)
#   s ── t                     another root
PARENTS: dict[str, str | None] = {
    "r": None, "a": "r", "b": "a", "c": "b", "d": "a", "e": "d", "f": "d",
    "s": None, "t": "s",
}  # fmt: skip
CHILDREN = {"r": ["a"], "a": ["b", "d"], "b": ["c"], "d": ["e", "f"], "s": ["t"]}


def test_the_current_path_then_each_branch_after_the_one_it_leaves() -> None:
    found = branches(PARENTS, CHILDREN, "c")
    assert found == [
        Branch(["r", "a", "b", "c"], 0, None),
        Branch(["s", "t"], 0, 0),  # another root: nothing before it
        Branch(["r", "a", "d", "f"], 2, 0),  # on through the newest child
        Branch(["r", "a", "d", "e"], 3, 2),  # leaves the branch above, at d
    ]
    assert [b.first for b in found] == ["r", "s", "d", "e"]


def test_without_a_current_node_the_newest_children_make_the_path() -> None:
    assert branches(PARENTS, CHILDREN, None)[0] == Branch(["r", "a", "d", "f"], 0, None)
    assert branches(PARENTS, CHILDREN, "gone")[0].nodes == ["r", "a", "d", "f"]


@pytest.mark.parametrize(
    ("parents", "children", "current", "problem"),
    [
        ({"a": "b", "b": "a"}, {}, "a", "node a is its own ancestor"),
        ({"a": None, "b": "x"}, {"a": ["b"]}, "b", "names parent x, which is missing"),
        ({"a": None}, {"a": ["z"]}, "a", "node a names child z, which is missing"),
        ({"a": None, "b": "a"}, {"a": ["b"], "b": ["a"]}, None, "node a is its own ancestor"),
        ({"a": "b", "b": "a"}, {}, None, "no node is a root"),
    ],
)
def test_a_tree_that_cannot_be_walked_is_refused(
    parents: dict[str, str | None],
    children: dict[str, list[str]],
    current: str | None,
    problem: str,
) -> None:
    with pytest.raises(TreeError) as raised:
        branches(parents, children, current)
    assert problem in str(raised.value)
