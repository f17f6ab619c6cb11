"""Strategy specs: a strategy written as one short string, and read back.

A spec is a short name and the strategy's own keywords::

    spec    = name [ ":" pair { "," pair } ]
    pair    = keyword "=" value
    value   = int | float | "true" | "false" | "none" | bare-string

``context-window:max_context_window_tokens=8192,max_output_tokens=1024`` is
``ContextWindowCompactionStrategy(max_context_window_tokens=8192, max_output_tokens=1024)``.
Ints are decimal (``-3``, ``40``), floats have a point or an exponent (``0.5``, ``1e-05``),
``true``, ``false`` and ``none`` are literals (in any case), and a bare string is a
word of letters, digits and ``_ . + -`` (no quoting, no nesting). Spaces around names,
keywords and values are ignored.

The short names are ``truncation``, ``sliding-window``, ``tool-result``, ``selective``
and ``context-window``; the keywords are exactly their constructors' (Agent Framework's
names). The strategies that need objects (``summarization``, ``reduction``,
``token-budget``, ``pipeline``) and the ``trigger`` and ``target`` keywords are refused.
The ``tokenizer`` keyword names a tokenizer (``tokenizer=o200k_base``) or ``none``; when
a spec does not give it, the strategy gets the tokenizer passed to
:func:`parse_strategy` (None by default).

:func:`format_strategy` writes a strategy back: its short name, then the keywords whose
values differ from the constructor's defaults (the required ones always), in the
constructor's order; floats as Python's shortest round-tripping ``repr`` (``0.1``,
``1e-05``). Truncation's ``tokenizer`` is always written (``tokenizer=none`` in
message-count mode), because it chooses between counting messages and tokens and a
tokenizer given to :func:`parse_strategy` would otherwise switch the mode.

Every problem raises :class:`InvalidStrategySpec`, a :class:`ValueError` with a one-line
message naming it (which the store reports as its own ``InvalidInput``).
:func:`strategy_from_params` rebuilds a strategy from the name and params an audit
event recorded. The whole description, with examples: ``docs/strategies.md``.
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from strategies.base import CompactionStrategy
from strategies.context_window import ContextWindowCompactionStrategy
from strategies.errors import ChatledgerError
from strategies.selective import SelectiveToolCallCompactionStrategy
from strategies.sliding_window import SlidingWindowStrategy
from strategies.tokenizers import SUPPORTED_ENCODINGS, Tokenizer, tokenizer_named
from strategies.tool_result import ToolResultCompactionStrategy
from strategies.truncation import TruncationStrategy

__all__ = [
    "InvalidStrategySpec",
    "format_strategy",
    "parse_strategy",
    "spec_name",
    "strategy_from_params",
    "strategy_name",
]


class InvalidStrategySpec(ChatledgerError, ValueError):
    """A strategy spec that cannot be read or built; the one-line message says why."""


_Value = int | float | bool | str | None
"""What a spec's value reads as."""

_INT_TEXT = re.compile(r"[+-]?[0-9]+")
_FLOAT_TEXT = re.compile(r"[+-]?(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+(?=[eE]))(?:[eE][+-]?[0-9]+)?")
_BARE_TEXT = re.compile(r"[\w.+-]+")
_LITERALS: Final[Mapping[str, _Value]] = {"true": True, "false": False, "none": None}
_TRIGGER_KEYWORDS = ("trigger", "target")


def _read_value(text: str) -> _Value:
    """The value a spec's text stands for; raises ValueError when it is none."""
    if text.lower() in _LITERALS:
        return _LITERALS[text.lower()]
    if _INT_TEXT.fullmatch(text):
        return int(text)
    if _FLOAT_TEXT.fullmatch(text):
        return float(text)
    if _BARE_TEXT.fullmatch(text):
        return text
    raise ValueError(text)


def _write_value(value: _Value) -> str | None:
    """The spec text of ``value``; None when it has none that reads back the same."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else None
    try:
        return value if _read_value(value) == value else None
    except ValueError:
        return None


def _show(value: object) -> str:
    """``value`` as a message shows it: strings quoted, other values in spec form."""
    if isinstance(value, int | float) or value is None:
        return _write_value(value) or repr(value)
    return repr(value)


# --------------------------------------------------------------------------- types


@dataclass(frozen=True, slots=True)
class _Type:
    """The values one keyword accepts, and their normal form."""

    label: str
    accepts: Callable[[object], bool]
    normal: Callable[[Any], _Value] = lambda value: value


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return _is_int(value) or (isinstance(value, float) and math.isfinite(value))


_INT = _Type("an int", _is_int)
_OPTIONAL_INT = _Type("an int or none", lambda v: v is None or _is_int(v))
_FLOAT = _Type("a number", _is_number, float)
_BOOL = _Type("true or false", lambda v: isinstance(v, bool))
_TOKENIZER = _Type("a tokenizer name or none", lambda v: v is None or isinstance(v, str))


# --------------------------------------------------------------------------- kinds


@dataclass(frozen=True, slots=True)
class _Kind:
    """A strategy that specs can write: its short name, class and keywords (in the
    constructor's order)."""

    spec: str
    cls: type[CompactionStrategy]
    keywords: Mapping[str, _Type]
    always: frozenset[str] = frozenset()
    """Keywords written even at their default value."""
    defaults: Mapping[str, object] = field(init=False)
    """The constructor's defaults (``inspect.Parameter.empty`` for a required one)."""

    def __post_init__(self) -> None:
        parameters = inspect.signature(self.cls).parameters
        defaults = {k: parameters[k].default for k in self.keywords}
        object.__setattr__(self, "defaults", defaults)

    @property
    def required(self) -> list[str]:
        """The keywords the constructor requires."""
        return [k for k, d in self.defaults.items() if d is inspect.Parameter.empty]

    @property
    def class_name(self) -> str:
        """The class's name, which is also the strategy's ``name``."""
        return self.cls.__name__


_KINDS: Final[tuple[_Kind, ...]] = (
    _Kind(
        "truncation",
        TruncationStrategy,
        {
            "max_n": _INT,
            "compact_to": _INT,
            "tokenizer": _TOKENIZER,
            "preserve_system": _BOOL,
            "preserve_first_user_group": _BOOL,
        },
        always=frozenset({"tokenizer"}),
    ),
    _Kind(
        "sliding-window",
        SlidingWindowStrategy,
        {
            "keep_last_groups": _OPTIONAL_INT,
            "keep_last_turns": _OPTIONAL_INT,
            "preserve_system": _BOOL,
        },
    ),
    _Kind("tool-result", ToolResultCompactionStrategy, {"keep_last_tool_call_groups": _INT}),
    _Kind("selective", SelectiveToolCallCompactionStrategy, {"keep_last_tool_call_groups": _INT}),
    _Kind(
        "context-window",
        ContextWindowCompactionStrategy,
        {
            "max_context_window_tokens": _INT,
            "max_output_tokens": _INT,
            "tokenizer": _TOKENIZER,
            "tool_eviction_threshold": _FLOAT,
            "truncation_threshold": _FLOAT,
            "keep_last_tool_call_groups": _INT,
            "preserve_first_user_group": _BOOL,
            "reserved_tokens": _INT,
            "start_at_user": _BOOL,
            "min_saving_tokens": _INT,
            "eviction_headroom": _FLOAT,
        },
    ),
)

_REFUSED: Final[Mapping[str, tuple[str, str]]] = {
    "summarization": ("SummarizationStrategy", "it needs a summarizer client"),
    "reduction": ("ToolResultReductionStrategy", "it needs a reducer function per tool"),
    "token-budget": (
        "TokenBudgetComposedStrategy",
        "it composes strategy objects and needs a tokenizer object",
    ),
    "pipeline": ("PipelineStrategy", "it composes strategy objects"),
}
"""Short names of the strategies a spec cannot write: their class name and why."""

_BY_SPEC: Final = {k.spec: k for k in _KINDS}
_BY_CLASS: Final = {k.cls: k for k in _KINDS}
_BY_NAME: Final = {k.class_name: k for k in _KINDS}
_SHORT_NAMES: Final = {
    **{k.class_name: k.spec for k in _KINDS},
    **{cls: spec for spec, (cls, _) in _REFUSED.items()},
}


def _known() -> str:
    return ", ".join(sorted(_BY_SPEC))


def _listed(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _refusal(spec: str) -> InvalidStrategySpec:
    cls, why = _REFUSED[spec]
    return InvalidStrategySpec(f"{spec} cannot be written as a spec: {why}; build {cls} in Python")


def _kind_named(name: str, spec: str) -> _Kind:
    if name in _BY_SPEC:
        return _BY_SPEC[name]
    short = _SHORT_NAMES.get(name)
    if name in _REFUSED or short in _REFUSED:
        raise _refusal(short or name)
    hint = f" (did you mean {short}?)" if short else ""
    raise InvalidStrategySpec(
        f"unknown strategy {name!r} in spec {spec!r}{hint}; known: {_known()}"
    )


# --------------------------------------------------------------------------- building


def _checked(kind: _Kind, keyword: str, value: object) -> _Value:
    if keyword in _TRIGGER_KEYWORDS:
        raise InvalidStrategySpec(
            f"{kind.spec}: {keyword} cannot be written in a spec (triggers are objects); "
            f"build {kind.class_name} in Python"
        )
    kind_type = kind.keywords.get(keyword)
    if kind_type is None:
        raise InvalidStrategySpec(
            f"{kind.spec} has no keyword {keyword!r}; its keywords: {', '.join(kind.keywords)}"
        )
    if not kind_type.accepts(value):
        raise InvalidStrategySpec(
            f"{kind.spec}: {keyword} must be {kind_type.label}, got {_show(value)}"
        )
    return kind_type.normal(value)


def _tokenizer_named(kind: _Kind, name: str) -> Tokenizer:
    if name not in {"character_estimator", *SUPPORTED_ENCODINGS}:
        known = ", ".join(["character_estimator", *SUPPORTED_ENCODINGS])
        raise InvalidStrategySpec(
            f"{kind.spec}: unknown tokenizer {name!r}; name one of {known}, "
            "or pass the tokenizer to parse_strategy"
        )
    return tokenizer_named(name)


def _tokenizer(
    kind: _Kind, values: Mapping[str, _Value], given: Tokenizer | None
) -> Tokenizer | None:
    if "tokenizer" not in values:
        return given
    name = values["tokenizer"]
    if name is None:
        return None
    assert isinstance(name, str)  # checked: a name or none
    if given is None:
        return _tokenizer_named(kind, name)
    if given.name != name:
        raise InvalidStrategySpec(
            f"{kind.spec}: the spec names tokenizer {name!r} but the tokenizer given is "
            f"{given.name!r}"
        )
    return given


def _build(
    kind: _Kind, values: Mapping[str, object], tokenizer: Tokenizer | None
) -> CompactionStrategy:
    checked = {k: _checked(kind, k, v) for k, v in values.items()}
    missing = [k for k in kind.required if k not in checked]
    if missing:
        raise InvalidStrategySpec(f"{kind.spec} needs {_listed(missing)}")
    arguments: dict[str, object] = dict(checked)
    if "tokenizer" in kind.keywords:
        arguments["tokenizer"] = _tokenizer(kind, checked, tokenizer)
    try:
        return kind.cls(**arguments)
    except ValueError as exc:
        raise InvalidStrategySpec(f"{kind.spec}: {exc}") from exc


# --------------------------------------------------------------------------- reading


def _pairs(kind: _Kind, text: str, spec: str) -> dict[str, _Value]:
    if not text.strip():
        raise InvalidStrategySpec(f"spec {spec!r} has ':' but no key=value pairs after it")
    values: dict[str, _Value] = {}
    for pair in text.split(","):
        keyword, equals, raw = (part.strip() for part in pair.partition("="))
        if not pair.strip():
            raise InvalidStrategySpec(
                f"empty pair in spec {spec!r}: write key=value pairs separated by commas, "
                "with no comma at either end"
            )
        if not equals or not keyword or not raw:
            raise InvalidStrategySpec(
                f"malformed pair {pair.strip()!r} in spec {spec!r}: write key=value pairs "
                "separated by commas"
            )
        if keyword in values:
            raise InvalidStrategySpec(f"{kind.spec}: keyword {keyword} is given twice")
        try:
            values[keyword] = _read_value(raw)
        except ValueError:
            raise InvalidStrategySpec(
                f"malformed value {raw!r} for {keyword} in spec {spec!r}: write an int, a "
                "float, true, false, none or a bare word (no quotes, spaces, '=', ',' or ':')"
            ) from None
    return values


def parse_strategy(spec: str, *, tokenizer: Tokenizer | None = None) -> CompactionStrategy:
    """The strategy ``spec`` describes (grammar in the module docstring).

    ``tokenizer`` goes to the strategies that take one (truncation, context window),
    unless the spec names one (``tokenizer=NAME`` must then be its name) or says
    ``tokenizer=none``.

    Raises:
        InvalidStrategySpec: the spec is empty or malformed, names an unknown or refused
            strategy or keyword, a value has the wrong type, or the strategy refuses the
            values (its own ``ValueError``'s message, after the spec's name).
    """
    if not isinstance(spec, str):
        raise InvalidStrategySpec(f"a strategy spec is a string, got {type(spec).__name__}")
    name, colon, rest = spec.partition(":")
    name = name.strip()
    if not name:
        example = "e.g. truncation:max_n=20,compact_to=10"
        if not spec.strip():
            raise InvalidStrategySpec(f"empty strategy spec: write name[:key=value,...], {example}")
        raise InvalidStrategySpec(f"spec {spec!r} has no strategy name before ':'; {example}")
    kind = _kind_named(name, spec)
    values = _pairs(kind, rest, spec) if colon else {}
    return _build(kind, values, tokenizer)


# --------------------------------------------------------------------------- writing


def _spec_text(kind: _Kind, params: Mapping[str, object]) -> str | None:
    if any(params.get(k) is not None for k in _TRIGGER_KEYWORDS):
        return None
    pairs: list[str] = []
    for keyword, kind_type in kind.keywords.items():
        value = params.get(keyword, kind.defaults[keyword])
        if not kind_type.accepts(value):
            return None
        value = kind_type.normal(value)
        default = kind.defaults[keyword]
        if keyword not in kind.always and type(value) is type(default) and value == default:
            continue
        text = _write_value(value)
        if text is None:
            return None
        pairs.append(f"{keyword}={text}")
    return ":".join([kind.spec, ",".join(pairs)]) if pairs else kind.spec


def format_strategy(strategy: CompactionStrategy) -> str | None:
    """``strategy`` as a spec that :func:`parse_strategy` reads back into a strategy that
    plans the same change sets; None when it cannot be written as one.

    Only the five spec-able classes themselves (not subclasses, nor third-party
    strategies) are written, and only without a trigger or target; a tokenizer is
    written by name (None when the name is not a bare word). The keywords whose values
    differ from the constructor's defaults are written, the required ones always (and
    truncation's ``tokenizer``), in the constructor's order; floats as their shortest
    round-tripping ``repr``.
    """
    kind = _BY_CLASS.get(type(strategy))
    if kind is None:
        return None
    return _spec_text(kind, strategy.params())


_CALIBRATION_KEY: Final = "calibration"
"""The key under which a calibrated run records its fit beside the strategy's params
(``store.usage.calibration``): not a keyword of the strategy."""


def strategy_from_params(name: str, params: Mapping[str, Any]) -> CompactionStrategy | None:
    """Rebuild a strategy from what an audit event recorded: its ``name`` and
    ``params()`` (``strategy.name`` and ``strategy.params()``); None when it cannot.

    It cannot for the strategies a spec cannot write, with a trigger or target, with a
    key the strategy does not take or a value of the wrong type, with values the
    strategy refuses, or with a tokenizer other than ``character_estimator`` and the
    shipped tiktoken encodings (the strategies keep only a tokenizer's name in their
    params). Keys left out take the constructor's defaults, so the params of an older
    release, without a keyword added since, are read with that keyword's default.
    """
    kind = _BY_NAME.get(name) or _BY_SPEC.get(name)
    if kind is None or not isinstance(params, Mapping):
        return None
    if any(params.get(k) is not None for k in _TRIGGER_KEYWORDS):
        return None
    values = {
        k: v for k, v in params.items() if k not in _TRIGGER_KEYWORDS and k != _CALIBRATION_KEY
    }
    try:
        return _build(kind, values, None)
    except InvalidStrategySpec:
        return None


def spec_name(strategy_name: str) -> str | None:
    """The short name of a strategy's ``name`` (``"TruncationStrategy"`` is
    ``"truncation"``), also for the strategies a spec cannot write
    (``"summarization"``); None for a name the library does not know."""
    return _SHORT_NAMES.get(strategy_name)


def strategy_name(short_name: str) -> str | None:
    """The ``name`` a strategy records (``"truncation"`` is ``"TruncationStrategy"``):
    the inverse of :func:`spec_name`; None for a short name the library does not know."""
    return next((name for name, short in _SHORT_NAMES.items() if short == short_name), None)
