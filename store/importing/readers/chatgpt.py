"""``chatgpt``: ChatGPT's data export, ``conversations.json`` or the export's ``.zip``.

Each conversation is a tree (``mapping``: nodes by id, each with its ``parent`` and
``children``; ``current_node`` the leaf the user last saw). Its current path is the
session (its id the conversation's ``conversation_id``, else its ``id``; its title the
conversation's ``title``); every other branch (:mod:`store.importing.readers._tree`) is
a fork of the path it leaves, at the last message they share, with the id
``<session>~<first node of its own>``, so that importing the export again finds it. A
branch that shares no imported message with the path it leaves (an edit of the first
question, which leaves from the hidden system root) is a session of its own, a root; the
first message of every branch names the session it leaves and the node it leaves at
(:data:`~store.formats.chatgpt.CHATGPT_BRANCH_KEY`).

Left out of every path, by rule: a node without a message (the export's
``client-created-root``), a message flagged ``is_visually_hidden_from_conversation``
(the system prompt's placeholder, custom instructions, contextual-answers prompts), and
a ``system`` message with no text (the empty system root). The messages are those
:func:`~store.formats.chatgpt.from_chatgpt` makes of the nodes left. Conversations are
streamed one at a time (:mod:`store.importing.readers._exports`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from store.errors import InvalidSource
from store.formats import FormatError
from store.formats.chatgpt import CHATGPT_BRANCH_KEY, from_chatgpt
from store.importing.readers._convert import own_id
from store.importing.readers._exports import conversations
from store.importing.readers._forks import plan
from store.importing.readers._tree import Branch, TreeError, branches
from store.importing.source import Conversation, ForkOrigin, Located, reading
from strategies.messages import Message

__all__ = ["read", "shown_node"]


def shown_node(node: Mapping[str, Any]) -> bool:
    """Whether a node becomes a message (the module docstring's rule)."""
    message = node.get("message")
    if not isinstance(message, Mapping):
        return False
    metadata = message.get("metadata")
    if isinstance(metadata, Mapping) and metadata.get("is_visually_hidden_from_conversation"):
        return False
    author = message.get("author")
    if isinstance(author, Mapping) and author.get("role") == "system":
        return not _empty(message.get("content"))
    return True


def _empty(content: Any) -> bool:
    """Whether a content holds no text: text parts that are all empty."""
    if not isinstance(content, Mapping) or content.get("content_type") != "text":
        return False
    parts = content.get("parts")
    return isinstance(parts, list) and all(isinstance(p, str) and not p.strip() for p in parts)


def _tree(source: str, where: str, value: Any) -> tuple[dict[str, Any], list[Branch]]:
    mapping = value.get("mapping")
    if not isinstance(mapping, dict):
        raise InvalidSource(source, where, "expected a ChatGPT conversation (no mapping)")
    parents: dict[str, str | None] = {}
    children: dict[str, list[str]] = {}
    for node_id, node in mapping.items():
        if not isinstance(node, dict):
            raise InvalidSource(source, f"{where} node {node_id}", "a node must be an object")
        parent, listed = node.get("parent"), node.get("children", [])
        if not (parent is None or isinstance(parent, str)) or not isinstance(listed, list):
            raise InvalidSource(
                source,
                f"{where} node {node_id}",
                "parent must be a node id or null, children a list",
            )
        parents[node_id] = parent
        children[node_id] = [c for c in listed if isinstance(c, str)]
    current = value.get("current_node")
    try:
        return mapping, branches(parents, children, current if isinstance(current, str) else None)
    except TreeError as error:
        raise InvalidSource(source, where, str(error)) from None


def _messages(
    source: str, where: str, mapping: dict[str, Any], nodes: list[str], links: dict[str, Any]
) -> list[Located]:
    items = [{**mapping[n], "id": n} for n in nodes]
    try:
        converted = from_chatgpt(items, allow_custom_roles=reading().allow_custom_roles)
    except FormatError as error:
        raise InvalidSource(source, f"{where} node {nodes[error.index]}", error.problem) from None
    return [
        Located(_linked(m, links[n]) if n in links else m, f"{where} node {n}")
        for m, n in zip(converted, nodes, strict=True)
    ]


def _linked(message: Message, link: dict[str, str | None]) -> Message:
    metadata = {**message.metadata, CHATGPT_BRANCH_KEY: link}
    return message.model_copy(update={"metadata": metadata})


def _own_id(value: dict[str, Any]) -> str | None:
    return own_id(value.get("conversation_id")) or own_id(value.get("id"))


def _sessions(source: str, number: int, value: Any) -> Iterator[Conversation]:
    where = f"conversation {number}"
    if not isinstance(value, dict):
        raise InvalidSource(source, where, "expected a ChatGPT conversation (an object)")
    session = _own_id(value)
    title = value.get("title") if isinstance(value.get("title"), str) else None
    title = title or None  # an untitled conversation has no title, not an empty one
    if value.get("mapping") == {}:
        return  # a conversation without a message
    mapping, found = _tree(source, where, value)
    planned, links = plan(session, found, lambda node: shown_node(mapping[node]))
    for each in planned:
        located = _messages(source, where, mapping, each.nodes, links)
        if each.branch.parent is None:
            yield Conversation(source, where, each.session_id, located, title=title)
            continue
        origin = ForkOrigin(each.parent, each.at) if each.parent is not None and each.at else None
        branch_where = f"{where} branch {each.branch.first}"
        yield Conversation(
            source, branch_where, each.session_id, located, title=title, origin=origin
        )


def read(path: Path, source: str) -> Iterator[Conversation]:
    """The sessions of an export: each conversation's current path, then its branches."""
    for number, value in conversations(path, source):
        try:
            found = list(_sessions(source, number, value))  # every branch converts, or none
        except InvalidSource as error:
            own = _own_id(value) if isinstance(value, dict) else None
            yield Conversation(source, f"conversation {number}", own, error=error)
            continue
        yield from found
