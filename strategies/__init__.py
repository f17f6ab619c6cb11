"""chatledger's pure compaction engine: messages, groups, tokenizers, views, strategies.

Nothing here does I/O or imports :mod:`store`.
"""

from strategies.messages import (
    CONTENTS_ADAPTER,
    MESSAGES_ADAPTER,
    Content,
    DataContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    OtherContent,
    ReasoningContent,
    TextContent,
    UriContent,
)

__all__ = [
    "CONTENTS_ADAPTER",
    "MESSAGES_ADAPTER",
    "Content",
    "DataContent",
    "FunctionCallContent",
    "FunctionResultContent",
    "Message",
    "OtherContent",
    "ReasoningContent",
    "TextContent",
    "UriContent",
]
