"""Strategy specs: the grammar, its round trip, its errors, and rebuilding from params.

The round trip is a property: every spec-able strategy, drawn with random valid
keywords, written by ``format_strategy`` and read back by ``parse_strategy``, plans the
same change sets as the original on generated conversations (and so does the one
``strategy_from_params`` rebuilds from its recorded params).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import strategies
from strategies import (
    CharacterEstimatorTokenizer,
    CompactionStrategy,
    ContextWindowCompactionStrategy,
    FakeSummarizer,
    InvalidStrategySpec,
    PipelineStrategy,
    SelectiveToolCallCompactionStrategy,
    SlidingWindowStrategy,
    SummarizationStrategy,
    TiktokenTokenizer,
    TokenBudgetComposedStrategy,
    TokensExceed,
    ToolResultCompactionStrategy,
    ToolResultReductionStrategy,
    TruncationStrategy,
    format_strategy,
    parse_strategy,
    spec_name,
    strategy_from_params,
)
from strategies.changeset import ChangeSet
from strategies.specs import _KINDS
from strategies.view import View
from tests.strategies.conversations import Chat, chats
from tests.strategies.invariants import changeset_signature

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TOKENIZER = CharacterEstimatorTokenizer()
"""The tokenizer of the generated views (``View.from_messages``'s default)."""

SPECABLE = (
    TruncationStrategy,
    SlidingWindowStrategy,
    ToolResultCompactionStrategy,
    SelectiveToolCallCompactionStrategy,
    ContextWindowCompactionStrategy,
)


# --------------------------------------------------------------------------- generators


def _fraction(low: float, high: float) -> st.SearchStrategy[float]:
    return st.floats(min_value=low, max_value=high, allow_nan=False, allow_infinity=False)


@st.composite
def truncations(draw: Any, view: View) -> CompactionStrategy:
    tokenizer = draw(st.sampled_from([None, TOKENIZER]))
    size = view.message_count if tokenizer is None else view.token_count
    max_n = draw(st.integers(1, max(2, 2 * size)))
    return TruncationStrategy(
        max_n=max_n,
        compact_to=draw(st.integers(1, max_n)),
        tokenizer=tokenizer,
        preserve_system=draw(st.booleans()),
        preserve_first_user_group=draw(st.booleans()),
    )


@st.composite
def sliding_windows(draw: Any, view: View) -> CompactionStrategy:
    size = draw(st.integers(1, 6))
    window = "keep_last_groups" if draw(st.booleans()) else "keep_last_turns"
    kwargs: dict[str, Any] = {window: size}
    if draw(st.booleans()):
        kwargs["preserve_system"] = draw(st.booleans())
    return SlidingWindowStrategy(**kwargs)


@st.composite
def tool_groups(draw: Any, view: View) -> CompactionStrategy:
    kind = draw(
        st.sampled_from([ToolResultCompactionStrategy, SelectiveToolCallCompactionStrategy])
    )
    if draw(st.booleans()):
        return kind()
    return kind(keep_last_tool_call_groups=draw(st.integers(0, 4)))


@st.composite
def context_windows(draw: Any, view: View) -> CompactionStrategy:
    output = draw(st.integers(0, 500))
    # an input budget of up to three times the context: the strategy acts on most chats
    window = output + draw(st.integers(2, max(20, 3 * view.token_count)))
    eviction = draw(st.one_of(st.just(0.5), _fraction(0.05, 1.0)))
    optional = {
        "tokenizer": st.sampled_from([None, TOKENIZER]),
        "truncation_threshold": st.one_of(st.just(0.8), _fraction(eviction, 1.0)).filter(
            lambda t: t >= eviction
        ),
        "keep_last_tool_call_groups": st.integers(0, 5),
        "preserve_first_user_group": st.booleans(),
        "reserved_tokens": st.integers(0, min(5, window - output - 1)),
        "start_at_user": st.booleans(),
        "min_saving_tokens": st.integers(0, max(1, view.token_count // 2)),
        "eviction_headroom": st.one_of(st.just(0.0), _fraction(0.0, eviction)),
    }
    chosen = draw(st.sets(st.sampled_from(sorted(optional))))
    if eviction > 0.8:  # above the default truncation threshold
        chosen.add("truncation_threshold")
    kwargs = {key: draw(optional[key]) for key in sorted(chosen)}
    return ContextWindowCompactionStrategy(
        max_context_window_tokens=window,
        max_output_tokens=output,
        tool_eviction_threshold=eviction,
        **kwargs,
    )


def specable(view: View) -> st.SearchStrategy[CompactionStrategy]:
    """Every spec-able strategy, with random valid keywords sized for ``view``."""
    kinds = (truncations, sliding_windows, tool_groups, context_windows)
    return st.one_of(*(kind(view) for kind in kinds))


def _view(chat: Chat) -> View:
    return View.from_messages(chat.messages, pinned=chat.pinned_groups)


async def _same_plans(
    view: View, original: CompactionStrategy, other: CompactionStrategy, *, labels: bool = True
) -> None:
    """Both plan the same change sets on ``view`` and on the view it leaves; with
    ``labels``, also with the same strategy name and params."""
    expected = await original.plan(view)
    got = await other.plan(view)
    assert changeset_signature(got) == changeset_signature(expected)
    if labels:
        assert (got.strategy, got.params) == (expected.strategy, expected.params)
    # and on the view each leaves (a second compaction), so the match is not by luck
    after = view.apply(expected)
    assert changeset_signature(await other.plan(after)) == changeset_signature(
        await original.plan(after)
    )


# --------------------------------------------------------------------------- the round trip


@SETTINGS
@given(chat=chats(), data=st.data())
def test_a_formatted_spec_parses_into_a_strategy_that_plans_the_same(
    chat: Chat, data: st.DataObject
) -> None:
    view = _view(chat)
    strategy = data.draw(specable(view), label="strategy")
    spec = format_strategy(strategy)
    assert spec is not None
    parsed = parse_strategy(spec)
    assert type(parsed) is type(strategy)
    assert parsed.params() == strategy.params()
    assert format_strategy(parsed) == spec
    # the store passes its tokenizer: the spec still plans the same (a context window
    # then records the tokenizer's name in its params)
    given_tokenizer = parse_strategy(spec, tokenizer=TOKENIZER)

    async def run() -> None:
        await _same_plans(view, strategy, parsed)
        await _same_plans(view, strategy, given_tokenizer, labels=False)

    asyncio.run(run())


@SETTINGS
@given(chat=chats(), data=st.data())
def test_recorded_params_rebuild_a_strategy_that_plans_the_same(
    chat: Chat, data: st.DataObject
) -> None:
    view = _view(chat)
    strategy = data.draw(specable(view), label="strategy")
    recorded = json.loads(json.dumps(strategy.params()))  # as an audit row keeps them
    rebuilt = strategy_from_params(strategy.name, recorded)
    assert rebuilt is not None
    assert type(rebuilt) is type(strategy)
    assert rebuilt.params() == strategy.params()
    asyncio.run(_same_plans(view, strategy, rebuilt))


# --------------------------------------------------------------------------- the grammar


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("tool-result", ToolResultCompactionStrategy()),
        (
            "selective:keep_last_tool_call_groups=0",
            SelectiveToolCallCompactionStrategy(keep_last_tool_call_groups=0),
        ),
        ("sliding-window:keep_last_turns=3", SlidingWindowStrategy(keep_last_turns=3)),
        (
            " sliding-window : keep_last_groups = 4 , preserve_system = False ",
            SlidingWindowStrategy(keep_last_groups=4, preserve_system=False),
        ),
        (
            "truncation:max_n=20,compact_to=10",
            TruncationStrategy(max_n=20, compact_to=10),
        ),
        (
            "truncation:max_n=900,compact_to=500,tokenizer=character_estimator",
            TruncationStrategy(max_n=900, compact_to=500, tokenizer=TOKENIZER),
        ),
        (
            "context-window:max_context_window_tokens=8192,max_output_tokens=1024,"
            "reserved_tokens=256,tool_eviction_threshold=.25,truncation_threshold=1,"
            "eviction_headroom=1e-1,min_saving_tokens=+128,tokenizer=NONE",
            ContextWindowCompactionStrategy(
                max_context_window_tokens=8192,
                max_output_tokens=1024,
                reserved_tokens=256,
                tool_eviction_threshold=0.25,
                truncation_threshold=1.0,
                eviction_headroom=0.1,
                min_saving_tokens=128,
            ),
        ),
    ],
)
def test_specs_build_the_strategy_with_its_own_keywords(
    spec: str, expected: CompactionStrategy
) -> None:
    built = parse_strategy(spec)
    assert type(built) is type(expected)
    assert built.params() == expected.params()


def test_format_writes_the_short_name_then_non_default_keywords_in_constructor_order() -> None:
    assert format_strategy(ToolResultCompactionStrategy()) == "tool-result"
    assert format_strategy(SelectiveToolCallCompactionStrategy()) == "selective"
    assert (
        format_strategy(SlidingWindowStrategy(preserve_system=False, keep_last_turns=2))
        == "sliding-window:keep_last_turns=2,preserve_system=false"
    )
    window = ContextWindowCompactionStrategy(
        min_saving_tokens=64,
        max_output_tokens=1024,
        tool_eviction_threshold=0.5,  # the default: not written
        start_at_user=True,
        max_context_window_tokens=8192,
    )
    assert format_strategy(window) == (
        "context-window:max_context_window_tokens=8192,max_output_tokens=1024,"
        "start_at_user=true,min_saving_tokens=64"
    )


def test_truncation_always_writes_its_tokenizer() -> None:
    # the tokenizer chooses messages or tokens, and a tokenizer given to parse_strategy
    # goes to a spec that names none: so the formatted spec names it, or says none
    by_messages = TruncationStrategy(max_n=20, compact_to=10)
    assert format_strategy(by_messages) == "truncation:max_n=20,compact_to=10,tokenizer=none"
    by_tokens = TruncationStrategy(max_n=900, compact_to=500, tokenizer=TOKENIZER)
    assert (
        format_strategy(by_tokens)
        == "truncation:max_n=900,compact_to=500,tokenizer=character_estimator"
    )
    # a spec without it takes the tokenizer given
    taken = parse_strategy("truncation:max_n=900,compact_to=500", tokenizer=TOKENIZER)
    assert isinstance(taken, TruncationStrategy) and taken.tokenizer is TOKENIZER
    kept = parse_strategy("truncation:max_n=20,compact_to=10,tokenizer=none", tokenizer=TOKENIZER)
    assert isinstance(kept, TruncationStrategy) and kept.tokenizer is None


def test_floats_are_written_as_their_shortest_round_tripping_repr() -> None:
    for value in (0.1 + 0.2, 1e-05, 0.3333333333333333, 1.0, 5e-324):
        strategy = ContextWindowCompactionStrategy(
            max_context_window_tokens=1000,
            max_output_tokens=0,
            tool_eviction_threshold=1.0,
            truncation_threshold=1.0,
            eviction_headroom=value,
        )
        spec = format_strategy(strategy)
        assert spec is not None and spec.endswith(f"eviction_headroom={value!r}")
        parsed = parse_strategy(spec)
        assert isinstance(parsed, ContextWindowCompactionStrategy)
        assert parsed.eviction_headroom == value
    whole = ContextWindowCompactionStrategy(
        max_context_window_tokens=1000, max_output_tokens=0, truncation_threshold=1
    )
    assert format_strategy(whole) == (
        "context-window:max_context_window_tokens=1000,max_output_tokens=0,truncation_threshold=1.0"
    )


def test_a_named_tokenizer_is_the_given_one_or_built_by_name() -> None:
    spec = "context-window:max_context_window_tokens=100,max_output_tokens=10,tokenizer={}"
    given = parse_strategy(spec.format("character_estimator"), tokenizer=TOKENIZER)
    assert isinstance(given, ContextWindowCompactionStrategy) and given.tokenizer is TOKENIZER
    built = parse_strategy(spec.format("character_estimator"))
    assert isinstance(built, ContextWindowCompactionStrategy)
    assert isinstance(built.tokenizer, CharacterEstimatorTokenizer)
    tiktoken = parse_strategy(spec.format("o200k_base"))
    assert isinstance(tiktoken, ContextWindowCompactionStrategy)
    assert isinstance(tiktoken.tokenizer, TiktokenTokenizer)
    assert tiktoken.tokenizer.name == "o200k_base"
    none = parse_strategy(spec.format("none"), tokenizer=TOKENIZER)
    assert isinstance(none, ContextWindowCompactionStrategy) and none.tokenizer is None
    absent = parse_strategy(
        "context-window:max_context_window_tokens=100,max_output_tokens=10", tokenizer=TOKENIZER
    )
    assert isinstance(absent, ContextWindowCompactionStrategy) and absent.tokenizer is TOKENIZER


def test_the_keywords_are_exactly_the_constructors() -> None:
    assert {k.cls for k in _KINDS} == set(SPECABLE)
    for kind in _KINDS:
        parameters = inspect.signature(kind.cls).parameters.values()
        names = [p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY]
        assert list(kind.keywords) == [n for n in names if n not in ("trigger", "target")]


@pytest.mark.parametrize(
    "strategy",
    [
        TruncationStrategy(max_n=20, compact_to=10),
        SlidingWindowStrategy(keep_last_groups=3),
        ToolResultCompactionStrategy(),
        SelectiveToolCallCompactionStrategy(),
        ContextWindowCompactionStrategy(max_context_window_tokens=100, max_output_tokens=10),
    ],
    ids=lambda s: s.name,
)
def test_params_hold_every_keyword(strategy: CompactionStrategy) -> None:
    kind = next(k for k in _KINDS if type(strategy) is k.cls)
    assert list(strategy.params()) == [*kind.keywords, "trigger", "target"]


def test_spec_names() -> None:
    assert spec_name("TruncationStrategy") == "truncation"
    assert spec_name("SlidingWindowStrategy") == "sliding-window"
    assert spec_name("ToolResultCompactionStrategy") == "tool-result"
    assert spec_name("SelectiveToolCallCompactionStrategy") == "selective"
    assert spec_name("ContextWindowCompactionStrategy") == "context-window"
    assert spec_name("SummarizationStrategy") == "summarization"
    assert spec_name("ToolResultReductionStrategy") == "reduction"
    assert spec_name("TokenBudgetComposedStrategy") == "token-budget"
    assert spec_name("PipelineStrategy") == "pipeline"
    assert spec_name("MyStrategy") is None


def test_the_functions_are_exported() -> None:
    for name in (
        "InvalidStrategySpec",
        "format_strategy",
        "parse_strategy",
        "spec_name",
        "strategy_from_params",
    ):
        assert name in strategies.__all__


# --------------------------------------------------------------------------- errors

KNOWN = "known: context-window, selective, sliding-window, tool-result, truncation"
TRUNCATION_KEYWORDS = (
    "its keywords: max_n, compact_to, tokenizer, preserve_system, preserve_first_user_group"
)
WINDOW = "context-window:max_context_window_tokens=100,max_output_tokens=10"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", re.escape("empty strategy spec: write name[:key=value,...]")),
        ("   ", "empty strategy spec"),
        (":max_n=3", "spec ':max_n=3' has no strategy name before ':'"),
        ("summary", f"unknown strategy 'summary' in spec 'summary'; {KNOWN}"),
        ("TruncationStrategy", "unknown strategy 'TruncationStrategy' .*did you mean truncation"),
        (
            "summarization",
            "summarization cannot be written as a spec: it needs a summarizer client; "
            "build SummarizationStrategy in Python",
        ),
        ("SummarizationStrategy", "summarization cannot be written as a spec"),
        ("reduction", "reduction cannot be written as a spec: it needs a reducer function"),
        ("token-budget", "token-budget cannot be written as a spec: it composes strategy"),
        ("pipeline:x=1", "pipeline cannot be written as a spec: it composes strategy objects"),
        ("tool-result:trigger=x", "tool-result: trigger cannot be written in a spec"),
        ("selective:target=none", "selective: target cannot be written in a spec"),
        ("truncation:maxn=3", f"truncation has no keyword 'maxn'; {TRUNCATION_KEYWORDS}"),
        ("truncation:max_n=3,max_n=3", "truncation: keyword max_n is given twice"),
        ("truncation:", "spec 'truncation:' has ':' but no key=value pairs after it"),
        ("truncation:max_n", "malformed pair 'max_n' in spec 'truncation:max_n': write key=value"),
        ("truncation:=3", "malformed pair '=3'"),
        ("truncation:max_n=", "malformed pair 'max_n='"),
        ("truncation:max_n=3,,compact_to=1", "empty pair in spec"),
        ("truncation:max_n=3,compact_to=1,", "empty pair in spec"),
        ("truncation:max_n='3'", "malformed value \"'3'\" for max_n"),
        ("truncation:max_n=3 4", "malformed value '3 4' for max_n"),
        ("truncation:max_n=a:b", "malformed value 'a:b' for max_n"),
        ("truncation:max_n=3.5,compact_to=1", "truncation: max_n must be an int, got 3.5"),
        ("truncation:max_n=ten,compact_to=1", "truncation: max_n must be an int, got 'ten'"),
        ("truncation:max_n=true,compact_to=1", "truncation: max_n must be an int, got true"),
        ("truncation:max_n=none,compact_to=1", "truncation: max_n must be an int, got none"),
        (
            "truncation:max_n=3,compact_to=1,preserve_system=1",
            "truncation: preserve_system must be true or false, got 1",
        ),
        (
            "sliding-window:keep_last_turns=few",
            "sliding-window: keep_last_turns must be an int or none, got 'few'",
        ),
        (f"{WINDOW},tool_eviction_threshold=half", "must be a number, got 'half'"),
        (f"{WINDOW},tool_eviction_threshold=nan", "must be a number, got 'nan'"),
        (f"{WINDOW},eviction_headroom=false", "eviction_headroom must be a number, got false"),
        (f"{WINDOW},tokenizer=3", "tokenizer must be a tokenizer name or none, got 3"),
        ("truncation", "truncation needs max_n and compact_to"),
        ("truncation:max_n=3", "truncation needs compact_to"),
        ("context-window", "context-window needs max_context_window_tokens and max_output_tokens"),
        (
            "truncation:max_n=3,compact_to=5",
            r"truncation: compact_to \(5\) must be at most max_n \(3\)",
        ),
        ("sliding-window", "sliding-window: pass exactly one of keep_last_groups and"),
        ("tool-result:keep_last_tool_call_groups=-1", "tool-result: keep_last_tool_call_groups"),
        (f"{WINDOW},eviction_headroom=0.6", r"context-window: eviction_headroom must be in"),
        (f"{WINDOW},min_saving_tokens=-1", "context-window: min_saving_tokens must be at least"),
        (
            f"{WINDOW},tokenizer=gpt2",
            "context-window: unknown tokenizer 'gpt2'; name one of character_estimator, "
            "o200k_base, cl100k_base, or pass the tokenizer to parse_strategy",
        ),
    ],
)
def test_every_error_names_the_problem_in_one_line(spec: str, message: str) -> None:
    with pytest.raises(InvalidStrategySpec, match=message) as caught:
        parse_strategy(spec)
    assert isinstance(caught.value, ValueError)
    assert "\n" not in str(caught.value)


def test_a_named_tokenizer_must_be_the_given_one() -> None:
    with pytest.raises(
        InvalidStrategySpec,
        match="truncation: the spec names tokenizer 'o200k_base' but the tokenizer given is "
        "'character_estimator'",
    ):
        parse_strategy("truncation:max_n=9,compact_to=5,tokenizer=o200k_base", tokenizer=TOKENIZER)


def test_a_spec_that_is_not_a_string_is_refused() -> None:
    with pytest.raises(InvalidStrategySpec, match="a strategy spec is a string, got int"):
        parse_strategy(3)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- what has no spec


class Named:
    """A tokenizer whose name is not a bare word."""

    def __init__(self, name: str) -> None:
        self.name = name

    def count_tokens(self, text: str) -> int:
        return len(text)


class MyTruncation(TruncationStrategy):
    """A subclass may plan differently: it has no spec."""


class ThirdParty:
    name = "ThirdParty"

    def params(self) -> dict[str, Any]:
        return {}

    async def plan(self, view: View) -> ChangeSet:
        return ChangeSet(strategy=self.name)


def _refused() -> list[CompactionStrategy]:
    return [
        SummarizationStrategy(client=FakeSummarizer()),
        ToolResultReductionStrategy(reducers={"search": str.upper}),
        TokenBudgetComposedStrategy(token_budget=10, tokenizer=TOKENIZER, strategies=[]),
        PipelineStrategy(ToolResultCompactionStrategy()),
    ]


@pytest.mark.parametrize(
    "strategy",
    [
        TruncationStrategy(max_n=20, compact_to=10, trigger=TokensExceed(5)),
        SlidingWindowStrategy(keep_last_groups=2, target=TokensExceed(5)),
        ToolResultCompactionStrategy(trigger=TokensExceed(5)),
        ContextWindowCompactionStrategy(
            max_context_window_tokens=100, max_output_tokens=10, trigger=TokensExceed(5)
        ),
        TruncationStrategy(max_n=20, compact_to=10, tokenizer=Named("my tokenizer")),
        TruncationStrategy(max_n=20, compact_to=10, tokenizer=Named("none")),
        TruncationStrategy(max_n=20, compact_to=10, tokenizer=Named("12")),
        MyTruncation(max_n=20, compact_to=10),
        ThirdParty(),
        *_refused(),
    ],
    ids=lambda s: type(s).__name__,
)
def test_what_a_spec_cannot_write_formats_to_none(strategy: CompactionStrategy) -> None:
    assert format_strategy(strategy) is None


def test_a_tokenizer_of_another_name_is_written_and_needs_the_tokenizer_to_read() -> None:
    chars = Named("chars")
    spec = format_strategy(TruncationStrategy(max_n=20, compact_to=10, tokenizer=chars))
    assert spec == "truncation:max_n=20,compact_to=10,tokenizer=chars"
    parsed = parse_strategy(spec, tokenizer=chars)
    assert isinstance(parsed, TruncationStrategy) and parsed.tokenizer is chars
    with pytest.raises(InvalidStrategySpec, match="unknown tokenizer 'chars'"):
        parse_strategy(spec)


# --------------------------------------------------------------------------- strategy_from_params


@pytest.mark.parametrize(
    "strategy",
    [
        TruncationStrategy(max_n=20, compact_to=10),
        TruncationStrategy(max_n=900, compact_to=500, tokenizer=TOKENIZER, preserve_system=False),
        TruncationStrategy(max_n=900, compact_to=500, tokenizer=TiktokenTokenizer("cl100k_base")),
        SlidingWindowStrategy(keep_last_groups=3),
        SlidingWindowStrategy(keep_last_turns=2, preserve_system=False),
        ToolResultCompactionStrategy(),
        ToolResultCompactionStrategy(keep_last_tool_call_groups=0),
        SelectiveToolCallCompactionStrategy(keep_last_tool_call_groups=3),
        ContextWindowCompactionStrategy(max_context_window_tokens=100, max_output_tokens=10),
        ContextWindowCompactionStrategy(
            max_context_window_tokens=8192,
            max_output_tokens=1024,
            tokenizer=TOKENIZER,
            tool_eviction_threshold=0.4,
            truncation_threshold=0.9,
            keep_last_tool_call_groups=2,
            preserve_first_user_group=True,
            reserved_tokens=256,
            start_at_user=True,
            min_saving_tokens=128,
            eviction_headroom=0.1,
        ),
    ],
    ids=lambda s: f"{s.name}-{len(format_strategy(s) or '')}",
)
def test_each_strategys_params_rebuild_it(strategy: CompactionStrategy) -> None:
    recorded = json.loads(json.dumps(strategy.params()))
    for name in (strategy.name, spec_name(strategy.name)):
        assert name is not None
        rebuilt = strategy_from_params(name, recorded)
        assert rebuilt is not None
        assert type(rebuilt) is type(strategy)
        assert rebuilt.params() == strategy.params()


def test_params_of_an_older_release_take_the_defaults_of_newer_keywords() -> None:
    window = ContextWindowCompactionStrategy(max_context_window_tokens=100, max_output_tokens=10)
    older = {
        k: v
        for k, v in window.params().items()
        if k not in ("min_saving_tokens", "eviction_headroom")
    }
    rebuilt = strategy_from_params(window.name, older)
    assert rebuilt is not None and rebuilt.params() == window.params()


def _params(strategy: CompactionStrategy, **changes: Any) -> dict[str, Any]:
    return {**strategy.params(), **changes}


TRUNCATION = TruncationStrategy(max_n=20, compact_to=10)


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("MyStrategy", {}),
        ("TruncationStrategy", _params(TRUNCATION, trigger=TokensExceed(5).params())),
        ("TruncationStrategy", _params(TRUNCATION, target=TokensExceed(5).params())),
        ("TruncationStrategy", _params(TRUNCATION, unknown=1)),
        ("TruncationStrategy", _params(TRUNCATION, max_n="20")),
        ("TruncationStrategy", _params(TRUNCATION, max_n=20.0)),
        ("TruncationStrategy", _params(TRUNCATION, compact_to=30)),
        ("TruncationStrategy", _params(TRUNCATION, tokenizer="chars")),
        ("TruncationStrategy", {"compact_to": 10}),
        ("TruncationStrategy", ["max_n", 20]),
        *[(s.name, json.loads(json.dumps(s.params()))) for s in _refused()],
    ],
)
def test_params_that_cannot_be_rebuilt_give_none(name: str, params: Any) -> None:
    assert strategy_from_params(name, params) is None
