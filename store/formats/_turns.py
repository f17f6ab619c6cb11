"""One model turn written as one message, by the formats whose messages hold calls.

The Responses API (and so the OpenAI Agents SDK) keeps each call of a model turn as an
item of its own, and chatledger stores each item as a message; Chat Completions,
Anthropic, LangChain and Agent Framework want one assistant message holding every call
of the turn, followed by their results (the Chat Completions API refuses an assistant
message with calls followed by another assistant message). :func:`turns` cuts the
messages into the runs that one target message holds, and :func:`joined` makes the
message that stands for a run.

A run is one message, or consecutive assistant messages written in the target's usual
shapes (not read from the target itself, whose messages come back as they were read):
reasoning that leads into them, text, and every call; text after calls joins them too,
as the Agents SDK's own converter joins it. Two assistant messages without a call,
each with text, stay two messages.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from strategies.messages import (
    Content,
    FunctionCallContent,
    Message,
    OtherContent,
    ReasoningContent,
)

__all__ = ["is_call", "joined", "turns"]


def is_call(content: Content) -> bool:
    """Whether ``content`` is a call (a function call, or a hosted call that pairs)."""
    if isinstance(content, FunctionCallContent):
        return True
    return isinstance(content, OtherContent) and content.pairing == "call"


def _holds_call(messages: Sequence[Message]) -> bool:
    return any(is_call(c) for m in messages for c in m.contents)


def _holds_text(messages: Sequence[Message]) -> bool:
    return any(
        not (is_call(c) or isinstance(c, ReasoningContent)) for m in messages for c in m.contents
    )


def _joins(run: list[Message], message: Message) -> bool:
    return _holds_call([message]) or _holds_call(run) or not _holds_text(run)


def turns(messages: Sequence[Message], native: Callable[[Message], bool]) -> list[list[Message]]:
    """``messages`` cut into runs, each written as one message (see the module);
    ``native`` says which messages were read from the target format."""
    runs: list[list[Message]] = []
    open_run: list[Message] | None = None
    for message in messages:
        if message.role != "assistant" or native(message):
            runs.append([message])
            open_run = None
        elif open_run is not None and _joins(open_run, message):
            open_run.append(message)
        else:
            open_run = [message]
            runs.append(open_run)
    return runs


def joined(run: Sequence[Message]) -> Message:
    """The message that stands for ``run``: its only message, or one assistant message
    holding every content of the run in order, with the first message's id, author and
    time (and no metadata: it is written in the target's usual shapes)."""
    if len(run) == 1:
        return run[0]
    first = run[0]
    return Message(
        role="assistant",
        contents=[content for message in run for content in message.contents],
        message_id=first.message_id,
        author_name=first.author_name,
        created_at=first.created_at,
    )
