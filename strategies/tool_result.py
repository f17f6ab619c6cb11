"""Tool-result compaction: each older tool-call group becomes one short summary message.

Same name, keywords and defaults as Agent Framework's ``ToolResultCompactionStrategy``.
The newest ``keep_last_tool_call_groups`` tool-call groups stay; each older one is
replaced, at its position, by an assistant message whose last text is exactly the
reference's: ``[Tool results: name: result; ...]`` (``no results`` when there are none),
capped at 4096 characters with ``... [truncated]``.

Unlike the reference, assistant text that shared a message with the calls is kept, as its
own text contents before the summary text; pinned groups and the in-flight tail stay;
orphan results and stale pending calls (never sent) are left alone. The summary message
carries ``metadata["chatledger_summary"]`` naming the strategy and what it replaced.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from strategies._selection import fewest_until, summary_steps
from strategies.changeset import ChangeSet, SummaryInsert
from strategies.groups import call_ids
from strategies.messages import (
    FunctionCallContent,
    FunctionResultContent,
    Message,
    OtherContent,
    TextContent,
)
from strategies.selective import ToolGroupStrategy
from strategies.triggers import Trigger
from strategies.view import GroupView, View

__all__ = ["SUMMARY_METADATA_KEY", "ToolResultCompactionStrategy", "tool_results_summary"]

SUMMARY_METADATA_KEY = "chatledger_summary"
"""Metadata key marking a summary message (value: strategy and replaced groups)."""

_PREFIX = "[Tool results: "
_SUFFIX = "]"
_MAX_CHARS = 4096
_MARKER = "... [truncated]"


def tool_results_summary(items: Sequence[str]) -> str:
    """The reference's summary text for ``name: result`` items, capped at 4096 characters."""
    label = "; ".join(items) if items else "no results"
    text = f"{_PREFIX}{label}{_SUFFIX}"
    if len(text) <= _MAX_CHARS:
        return text
    room = _MAX_CHARS - len(_PREFIX) - len(_MARKER) - len(_SUFFIX)
    return f"{_PREFIX}{label[:room].rstrip()}{_MARKER}{_SUFFIX}"


def _result_text(value: Any) -> str:
    """A result as Agent Framework renders it in ``Content.result``."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return str(value)
    return json.dumps(value, default=str)


def _hosted_output_text(payload: Mapping[str, Any]) -> str:
    output = payload.get("output")
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        texts = [
            item["text"]
            for item in output
            if isinstance(item, dict)
            and item.get("type") == "text"
            and isinstance(item.get("text"), str)
        ]
        if texts:
            return "\n".join(texts)
    if isinstance(output, dict):
        return json.dumps(output, ensure_ascii=False, default=str)
    return str(output)


def _call_names(messages: Sequence[Message]) -> dict[str, str]:
    names: dict[str, str] = {}
    for message in messages:
        for content in message.contents:
            if isinstance(content, FunctionCallContent) and content.call_id and content.name:
                names[content.call_id] = content.name
            elif isinstance(content, OtherContent) and content.kind == "mcp_server_tool_call":
                tool = content.payload.get("tool_name")
                if content.call_id and isinstance(tool, str) and tool:
                    names[content.call_id] = tool
    return names


def _result_items(messages: Sequence[Message]) -> list[str]:
    names = _call_names(messages)
    items: list[str] = []
    for message in messages:
        for content in message.contents:
            if isinstance(content, FunctionResultContent):
                text = _result_text(content.result)
            elif isinstance(content, OtherContent) and content.kind == "mcp_server_tool_result":
                text = _hosted_output_text(content.payload)
            else:
                continue
            name = names.get(content.call_id or "", "")
            items.append((f"{name}: {text}" if name else text).strip())
    return items


def _colocated_text(messages: Sequence[Message]) -> list[TextContent]:
    """Assistant text written in the same message as the calls, in order."""
    return [
        TextContent(text=c.text)
        for m in messages
        if m.role == "assistant" and call_ids(m)
        for c in m.contents
        if isinstance(c, TextContent) and c.text
    ]


def summary_message(group: GroupView, messages: Sequence[Message], strategy: str) -> Message:
    """The assistant message that replaces ``group``."""
    text = tool_results_summary(_result_items(messages))
    return Message(
        role="assistant",
        contents=[*_colocated_text(messages), TextContent(text=text)],
        message_id=f"tool_summary_{group.group_id}",
        metadata={
            SUMMARY_METADATA_KEY: {
                "strategy": strategy,
                "summary_of_group_ids": [group.group_id],
                "summary_of_message_ids": [m.message_id for m in messages],
            }
        },
    )


class ToolResultCompactionStrategy(ToolGroupStrategy):
    """Replace tool-call groups older than the newest ``keep_last_tool_call_groups``."""

    name = "ToolResultCompactionStrategy"

    async def plan(self, view: View) -> ChangeSet:
        """Summarize the older tool-call groups, one summary message each."""
        params = self.params()
        chosen = self.candidates(view)
        if not chosen:
            return ChangeSet(strategy=self.name, params=params)
        loaded = await view.messages(g.group_id for g in chosen)
        summaries = [
            SummaryInsert(
                message=summary_message(g, loaded[g.group_id], self.name),
                replaces=(g.group_id,),
            )
            for g in chosen
        ]
        target = self.stop
        if target is not None:
            summaries = _until(view, summaries, target)
        return ChangeSet(summaries=tuple(summaries), strategy=self.name, params=params)


def _until(view: View, summaries: list[SummaryInsert], target: Trigger) -> list[SummaryInsert]:
    """The leading summaries needed, oldest first, until ``target`` holds."""
    count = fewest_until(
        view,
        summary_steps(view, summaries),
        target,
        lambda k: view.apply(ChangeSet(summaries=tuple(summaries[:k]))),
    )
    return summaries[:count]
