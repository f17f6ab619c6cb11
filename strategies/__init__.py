"""chatledger's pure compaction engine: messages, groups, tokenizers, views, strategies,
and the bounding of tool results before they enter the history (:mod:`strategies.bounded`).

Nothing here does I/O (the summarizers receive an injected client) or imports
:mod:`store`.
"""

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
