"""Which entries of a Claude Code transcript form its conversation, in order.

Claude Code links every transcript entry (``user``, ``assistant``, ``system``,
``progress``, ``attachment``) to the one before it by ``parentUuid``. The conversation
is found as the Claude Agent SDK's own reader (``get_session_messages``) finds it:

- the leaf is the newest ``user`` or ``assistant`` entry (in file order) reached back
  from an entry nothing points to, preferring one of the main chain (not a sidechain,
  a team member's or a meta entry); the conversation is the walk from it back to the
  root;
- a ``compact_boundary`` starts a new root (``parentUuid`` null) and says, by
  ``logicalParentUuid``, which entry came before it: unlike the SDK, the walk goes on
  there, so that what the compaction summarized is imported too (excluded);
- one model response is written as one entry per content block, the entries chained
  one after another and sharing the API ``message.id``; the results of parallel calls
  each name their own call's entry as parent, so the transcript forks without being a
  branch. The walk keeps only the branch the conversation went on from; every entry of
  a response on the walk, and every result of its calls, that the walk missed is put
  back right after the response's last entry on the walk (entries in time order, then
  results in time order), as the SDK does.

Everything here is pure: entries are the parsed JSON objects, with their line numbers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CHAINED_TYPES", "Entry", "conversation_chain", "response_id"]

CHAINED_TYPES = frozenset({"user", "assistant", "system", "progress", "attachment"})
"""The entry types linked by ``uuid`` / ``parentUuid``."""

_SPOKEN = frozenset({"user", "assistant"})


@dataclass(frozen=True, slots=True, eq=False)
class Entry:
    """One parsed line of a transcript: its number and its value."""

    line: int
    value: dict[str, Any]

    @property
    def uuid(self) -> str:
        """The entry's own id (a chained entry always has one)."""
        return str(self.value["uuid"])

    @property
    def parent(self) -> str | None:
        """The entry before it in the chain, by ``parentUuid``."""
        parent = self.value.get("parentUuid")
        return parent if isinstance(parent, str) and parent else None

    @property
    def logical_parent(self) -> str | None:
        """What a compaction boundary follows (``logicalParentUuid``)."""
        parent = self.value.get("logicalParentUuid")
        return parent if isinstance(parent, str) and parent else None

    @property
    def kind(self) -> str:
        """The entry's ``type``."""
        return str(self.value.get("type"))

    @property
    def timestamp(self) -> str:
        """The entry's ``timestamp`` as written (ISO 8601, so it sorts), else empty."""
        stamp = self.value.get("timestamp")
        return stamp if isinstance(stamp, str) else ""


def response_id(entry: Entry) -> str | None:
    """The API ``message.id`` of an assistant entry (one model response)."""
    if entry.kind != "assistant":
        return None
    message = entry.value.get("message")
    found = message.get("id") if isinstance(message, dict) else None
    return found if isinstance(found, str) and found else None


def _blocks(entry: Entry, kind: str, key: str) -> list[str]:
    message = entry.value.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return []
    return [
        b[key]
        for b in content
        if isinstance(b, dict) and b.get("type") == kind and isinstance(b.get(key), str)
    ]


def _leaf(entries: list[Entry], by_uuid: dict[str, Entry]) -> Entry | None:
    """The newest user or assistant entry reached back from an entry nothing follows."""
    parents = {e.parent for e in entries if e.parent is not None}
    leaves: list[Entry] = []
    for terminal in (e for e in entries if e.uuid not in parents):
        current: Entry | None = terminal
        seen: set[str] = set()
        while current is not None and current.uuid not in seen:
            seen.add(current.uuid)
            if current.kind in _SPOKEN:
                leaves.append(current)
                break
            current = by_uuid.get(current.parent) if current.parent else None
    main = [
        e
        for e in leaves
        if not (e.value.get("isSidechain") or e.value.get("teamName") or e.value.get("isMeta"))
    ]
    return max(main or leaves, key=lambda e: e.line, default=None)


def _walk(leaf: Entry, by_uuid: dict[str, Entry]) -> list[Entry]:
    """From the leaf back to the root, across compaction boundaries, oldest first."""
    chain: list[Entry] = []
    seen: set[str] = set()
    current: Entry | None = leaf
    while current is not None and current.uuid not in seen:
        seen.add(current.uuid)
        chain.append(current)
        before = current.parent or current.logical_parent
        current = by_uuid.get(before) if before else None
    chain.reverse()
    return chain


@dataclass(slots=True)
class _Responses:
    """Every response's entries, and the entries whose results answer its calls."""

    entries: dict[str, list[Entry]] = field(default_factory=dict)
    results: dict[str, list[Entry]] = field(default_factory=dict)


def _responses(entries: Iterable[Entry]) -> _Responses:
    found = _Responses()
    owner: dict[str, str] = {}
    of_entry: dict[str, str] = {}
    results: list[Entry] = []
    for entry in entries:
        response = response_id(entry)
        if response is not None:
            found.entries.setdefault(response, []).append(entry)
            of_entry[entry.uuid] = response
            for call in _blocks(entry, "tool_use", "id"):
                owner.setdefault(call, response)
        elif entry.kind == "user" and _blocks(entry, "tool_result", "tool_use_id"):
            results.append(entry)
    for entry in results:
        answered = {owner[c] for c in _blocks(entry, "tool_result", "tool_use_id") if c in owner}
        if entry.parent in of_entry:
            answered.add(of_entry[entry.parent])
        for response in answered:
            found.results.setdefault(response, []).append(entry)
    return found


def _recovered(chain: list[Entry], every: list[Entry]) -> list[Entry]:
    """The chain with the entries and results of its responses the walk missed put back
    after each response's last entry on the chain."""
    on_chain = {e.uuid for e in chain}
    last: dict[str, str] = {}
    for entry in chain:
        response = response_id(entry)
        if response is not None:
            last[response] = entry.uuid
    responses = _responses(every)
    inserts: dict[str, list[Entry]] = {}
    for response, anchor in last.items():
        siblings = [e for e in responses.entries.get(response, []) if e.uuid not in on_chain]
        answers = [e for e in responses.results.get(response, []) if e.uuid not in on_chain]
        missed = sorted(siblings, key=lambda e: (e.timestamp, e.line))
        missed += sorted(dict.fromkeys(answers), key=lambda e: (e.timestamp, e.line))
        on_chain.update(e.uuid for e in missed)
        if missed:
            inserts[anchor] = missed
    out: list[Entry] = []
    for entry in chain:
        out.append(entry)
        out.extend(inserts.get(entry.uuid, ()))
    return out


def conversation_chain(entries: list[Entry]) -> list[Entry]:
    """The conversation of ``entries`` (chained entries of one writer, in file order),
    oldest first; empty when none of them is a user or assistant entry."""
    by_uuid = {e.uuid: e for e in entries}
    leaf = _leaf(entries, by_uuid)
    if leaf is None:
        return []
    return _recovered(_walk(leaf, by_uuid), entries)
