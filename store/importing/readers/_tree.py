"""The paths through a tree of messages (a conversation whose messages were edited or
regenerated): the current path, and every other branch as a path of its own.

A tree is nodes by id, each naming its parent and its children in order. The current
path runs from the root to the current leaf. Every child that leaves a path starts a
branch: the path to the child's node, then on through the last child of each node (the
newest) to a leaf; the branches that leave a branch are found the same way, so every
node is on at least one path. Another root (a node without a parent besides the current
path's) starts a branch with nothing before it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from store.errors import ChatledgerError

__all__ = ["Branch", "TreeError", "branches"]


class TreeError(ChatledgerError, ValueError):
    """A tree that cannot be walked: a node it names is missing, or it loops."""


@dataclass(frozen=True, slots=True)
class Branch:
    """One path through the tree."""

    nodes: list[str]
    """Its node ids, root first."""
    own: int
    """Where its own nodes start in :attr:`nodes` (0 for the current path and for a
    branch from another root): the nodes before are its parent's."""
    parent: int | None
    """The index of the branch it leaves, in the list :func:`branches` gives (None for
    the current path)."""

    @property
    def first(self) -> str:
        """Its first own node."""
        return self.nodes[self.own]


def _path_to(parents: Mapping[str, str | None], leaf: str) -> list[str]:
    path: list[str] = []
    seen: set[str] = set()
    node: str | None = leaf
    while node is not None:
        if node in seen:
            raise TreeError(f"node {node} is its own ancestor")
        if node not in parents:
            raise TreeError(
                f"node {path[-1] if path else leaf} names parent {node}, which is missing"
            )
        seen.add(node)
        path.append(node)
        node = parents[node]
    path.reverse()
    return path


def _descend(children: Mapping[str, Sequence[str]], start: str, seen: set[str]) -> list[str]:
    """``start``, then the last child of each node on, to a leaf."""
    if start in seen:
        raise TreeError(f"node {start} is its own ancestor")
    path = [start]
    node = start
    while children.get(node):
        node = children[node][-1]
        if node in seen or node in path:
            raise TreeError(f"node {node} is its own ancestor")
        path.append(node)
    return path


def _check(children: Mapping[str, Sequence[str]], parents: Mapping[str, str | None]) -> None:
    for node, listed in children.items():
        for child in listed:
            if child not in parents:
                raise TreeError(f"node {node} names child {child}, which is missing")


def branches(
    parents: Mapping[str, str | None],
    children: Mapping[str, Sequence[str]],
    current: str | None,
) -> list[Branch]:
    """The current path (first; to ``current``, or, without one, on from the first root
    through the newest children), then every branch (see the module docstring), each
    after the branch it leaves."""
    _check(children, parents)
    roots = [node for node, parent in parents.items() if parent is None]
    if current is not None and current in parents:
        main = _path_to(parents, current)
    elif roots:
        main = _descend(children, roots[0], set())
    else:
        raise TreeError("no node is a root (every node has a parent)")
    found = [Branch(main, 0, None)]
    found.extend(Branch(_descend(children, r, set()), 0, 0) for r in roots if r != main[0])
    started = {branch.first for branch in found}
    index = 0
    while index < len(found):
        branch = found[index]
        for position in range(branch.own, len(branch.nodes)):
            node = branch.nodes[position]
            on_path = branch.nodes[position + 1] if position + 1 < len(branch.nodes) else None
            for child in children.get(node, ()):
                if child != on_path and child not in started:
                    started.add(child)
                    prefix = branch.nodes[: position + 1]
                    path = prefix + _descend(children, child, set(prefix))
                    found.append(Branch(path, position + 1, index))
        index += 1
    return found
