"""chatledger's pure compaction engine: messages, groups, tokenizers, views, strategies,
and the bounding of tool results before they enter the history (:mod:`strategies.bounded`).

Nothing here does I/O (the summarizers receive an injected client) or imports
:mod:`store`.

Names load on first use (``from strategies import Message`` imports
:mod:`strategies.messages` then), so that importing the package or one of its light
modules (:mod:`strategies.errors`) costs no pydantic and no tokenizer.
"""

import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
    from strategies.apply import apply_compaction
    from strategies.base import CompactionStrategy, TokenizerMismatch
    from strategies.bounded import (
        InvalidCursor,
        Page,
        ResultBudgetError,
        ResultTooLarge,
        ToolResultAllowance,
        bound_result,
        bounded,
        cap_records,
        cap_text,
        paginate,
        select_fields,
    )
    from strategies.changeset import ChangeSet, Diagnostic, Exclusion, Reduction, SummaryInsert
    from strategies.context_window import ContextWindowCompactionStrategy
    from strategies.errors import ChatledgerError
    from strategies.groups import GROUP_KINDS, AnnotationState, GroupInfo, GroupKind, annotate
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
    from strategies.pipeline import PipelineStrategy
    from strategies.reduction import ToolResultReductionStrategy
    from strategies.selective import SelectiveToolCallCompactionStrategy
    from strategies.sliding_window import SlidingWindowStrategy
    from strategies.specs import (
        InvalidStrategySpec,
        format_strategy,
        parse_strategy,
        spec_name,
        strategy_from_params,
        strategy_name,
    )
    from strategies.summarization import SummarizationStrategy
    from strategies.summarizers import (
        AgentFrameworkSummarizer,
        FakeSummarizer,
        OpenAICompatibleSummarizer,
        Summarizer,
    )
    from strategies.token_budget import TokenBudgetComposedStrategy
    from strategies.tokenizers import (
        DEFAULT_POLICY,
        CharacterEstimatorTokenizer,
        CountingTokenizer,
        TiktokenTokenizer,
        TokenCountPolicy,
        Tokenizer,
        UnknownTokenizer,
        VocabularyIntegrityError,
        count_message_tokens,
    )
    from strategies.tool_result import ToolResultCompactionStrategy
    from strategies.triggers import (
        All,
        Always,
        Any,
        GroupsExceed,
        HasToolCalls,
        MessagesExceed,
        Never,
        Not,
        TokensBelow,
        TokensExceed,
        Trigger,
        TurnsExceed,
    )
    from strategies.truncation import TruncationStrategy
    from strategies.view import GroupView, MessageSource, Totals, View

_HOMES: dict[str, tuple[str, ...]] = {
    "strategies.apply": ("apply_compaction",),
    "strategies.base": (
        "CompactionStrategy",
        "TokenizerMismatch",
    ),
    "strategies.bounded": (
        "InvalidCursor",
        "Page",
        "ResultBudgetError",
        "ResultTooLarge",
        "ToolResultAllowance",
        "bound_result",
        "bounded",
        "cap_records",
        "cap_text",
        "paginate",
        "select_fields",
    ),
    "strategies.changeset": (
        "ChangeSet",
        "Diagnostic",
        "Exclusion",
        "Reduction",
        "SummaryInsert",
    ),
    "strategies.context_window": ("ContextWindowCompactionStrategy",),
    "strategies.errors": ("ChatledgerError",),
    "strategies.groups": (
        "GROUP_KINDS",
        "AnnotationState",
        "GroupInfo",
        "GroupKind",
        "annotate",
    ),
    "strategies.messages": (
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
    ),
    "strategies.pipeline": ("PipelineStrategy",),
    "strategies.reduction": ("ToolResultReductionStrategy",),
    "strategies.selective": ("SelectiveToolCallCompactionStrategy",),
    "strategies.sliding_window": ("SlidingWindowStrategy",),
    "strategies.specs": (
        "InvalidStrategySpec",
        "format_strategy",
        "parse_strategy",
        "spec_name",
        "strategy_from_params",
        "strategy_name",
    ),
    "strategies.summarization": ("SummarizationStrategy",),
    "strategies.summarizers": (
        "AgentFrameworkSummarizer",
        "FakeSummarizer",
        "OpenAICompatibleSummarizer",
        "Summarizer",
    ),
    "strategies.token_budget": ("TokenBudgetComposedStrategy",),
    "strategies.tokenizers": (
        "DEFAULT_POLICY",
        "CharacterEstimatorTokenizer",
        "CountingTokenizer",
        "TiktokenTokenizer",
        "TokenCountPolicy",
        "Tokenizer",
        "UnknownTokenizer",
        "VocabularyIntegrityError",
        "count_message_tokens",
    ),
    "strategies.tool_result": ("ToolResultCompactionStrategy",),
    "strategies.triggers": (
        "All",
        "Always",
        "Any",
        "GroupsExceed",
        "HasToolCalls",
        "MessagesExceed",
        "Never",
        "Not",
        "TokensBelow",
        "TokensExceed",
        "Trigger",
        "TurnsExceed",
    ),
    "strategies.truncation": ("TruncationStrategy",),
    "strategies.view": (
        "GroupView",
        "MessageSource",
        "Totals",
        "View",
    ),
}
"""The module each public name is imported from."""
_HOME = {name: module for module, names in _HOMES.items() for name in names}

# ``strategies.bounded`` is the decorator, not the sub-package of the same name: importing
# the sub-package binds it here, once, and that binding is dropped so that the name loads
# the decorator on first use.
_importlib.import_module("strategies.bounded")
del globals()["bounded"]


def __getattr__(name: str) -> _typing.Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'strategies' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "CONTENTS_ADAPTER",
    "DEFAULT_POLICY",
    "GROUP_KINDS",
    "MESSAGES_ADAPTER",
    "AgentFrameworkSummarizer",
    "All",
    "Always",
    "AnnotationState",
    "Any",
    "ChangeSet",
    "CharacterEstimatorTokenizer",
    "ChatledgerError",
    "CompactionStrategy",
    "Content",
    "ContextWindowCompactionStrategy",
    "CountingTokenizer",
    "DataContent",
    "Diagnostic",
    "Exclusion",
    "FakeSummarizer",
    "FunctionCallContent",
    "FunctionResultContent",
    "GroupInfo",
    "GroupKind",
    "GroupView",
    "GroupsExceed",
    "HasToolCalls",
    "InvalidCursor",
    "InvalidStrategySpec",
    "Message",
    "MessageSource",
    "MessagesExceed",
    "Never",
    "Not",
    "OpenAICompatibleSummarizer",
    "OtherContent",
    "Page",
    "PipelineStrategy",
    "ReasoningContent",
    "Reduction",
    "ResultBudgetError",
    "ResultTooLarge",
    "SelectiveToolCallCompactionStrategy",
    "SlidingWindowStrategy",
    "SummarizationStrategy",
    "Summarizer",
    "SummaryInsert",
    "TextContent",
    "TiktokenTokenizer",
    "TokenBudgetComposedStrategy",
    "TokenCountPolicy",
    "Tokenizer",
    "TokenizerMismatch",
    "TokensBelow",
    "TokensExceed",
    "ToolResultAllowance",
    "ToolResultCompactionStrategy",
    "ToolResultReductionStrategy",
    "Totals",
    "Trigger",
    "TruncationStrategy",
    "TurnsExceed",
    "UnknownTokenizer",
    "UriContent",
    "View",
    "VocabularyIntegrityError",
    "annotate",
    "apply_compaction",
    "bound_result",
    "bounded",
    "cap_records",
    "cap_text",
    "count_message_tokens",
    "format_strategy",
    "paginate",
    "parse_strategy",
    "select_fields",
    "spec_name",
    "strategy_from_params",
    "strategy_name",
]
