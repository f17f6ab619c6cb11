"""A tree's branches as sessions: the current path the conversation's session, every
other branch a fork of the branch it leaves, at the last message they share.

A branch's session id is ``<session>~<its first own node>``, so that importing the source
again finds it. A branch that shows nothing of its own is no session (its branches leave
its parent, at the same messages). A branch that shares no shown message with the one it
leaves (an edit of the first question) is a root session of its own. The first shown
node of every branch carries a link, ``{"of": SESSION, "at": NODE}``: the session it
leaves and the node it leaves at (None for a branch from another root), wherever that
node is shown, so that a root branch is still tied to its sibling.

What a node becomes (one message or several) and which nodes are shown is the format
reader's; this module only plans.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from store.importing.readers._tree import Branch

__all__ = ["BranchSession", "Link", "plan"]

Link = dict[str, str | None]
"""``{"of": SESSION, "at": NODE}``."""


@dataclass(frozen=True, slots=True)
class BranchSession:
    """One branch as a session."""

    branch: Branch
    session_id: str | None
    """Its id (None when the conversation has no id of its own)."""
    nodes: list[str]
    """The shown nodes of its path, root first."""
    shared: int
    """How many of :attr:`nodes` it shares with the session it leaves."""
    parent: str | None
    """The session it leaves (None for the current path)."""

    @property
    def at(self) -> str | None:
        """The last shown node it shares with :attr:`parent` (None: it shares none)."""
        return self.nodes[self.shared - 1] if self.shared else None


def plan(
    session: str | None, found: Sequence[Branch], shown: Callable[[str], bool]
) -> tuple[list[BranchSession], dict[str, Link]]:
    """The sessions of the branches ``found`` (current path first), and the link each
    branch's first shown node carries (see the module docstring)."""
    ids: list[str | None] = []
    sessions: list[BranchSession] = []
    links: dict[str, Link] = {}
    for branch in found:
        kept = [n for n in branch.nodes if shown(n)]
        before = set(branch.nodes[: branch.own])
        shared = sum(1 for n in kept if n in before)
        parent = ids[branch.parent] if branch.parent is not None else None
        if branch.parent is None:
            ids.append(session)
            sessions.append(BranchSession(branch, session, kept, 0, None))
        elif len(kept) == shared:  # nothing of its own is shown: no session
            ids.append(parent)
        else:
            own = f"{session}~{branch.first}" if session is not None else None
            ids.append(own)
            sessions.append(BranchSession(branch, own, kept, shared, parent))
            links[kept[shared]] = {
                "of": parent,
                "at": branch.nodes[branch.own - 1] if branch.own else None,
            }
    return [s for s in sessions if s.nodes], links
