"""One error tree: every exception class either package defines derives from
``ChatledgerError`` and keeps the built-in base that says what kind of failure it is.

The classes are found by walking both packages, so a new one that forgets the root
fails here, and so does one whose built-in base is not pinned below.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator
from types import ModuleType

import pytest

import store
import store.errors
import strategies
import strategies.errors
from store.errors import InvalidInput, strategy_errors

BUILT_IN_BASES: dict[str, type[BaseException]] = {
    "store.cli._common.CliError": Exception,
    "store.demo._script.MissingResult": RuntimeError,
    "store.encryption.sealing.UnknownDataKey": Exception,
    "store.errors.ConcurrentWriteError": Exception,
    "store.errors.CorruptRowError": Exception,
    "store.errors.EncryptionError": Exception,
    "store.errors.InvalidInput": ValueError,
    "store.errors.InvalidKey": ValueError,
    "store.errors.InvalidSource": ValueError,
    "store.errors.KeyRequired": Exception,
    "store.errors.MigrationRequired": Exception,
    "store.errors.PlaintextRows": Exception,
    "store.errors.RecordConflict": Exception,
    "store.errors.SessionNotFound": LookupError,
    "store.errors.StoreClosed": Exception,
    "store.errors.StoreError": Exception,
    "store.errors.StoreTimeout": Exception,
    "store.errors.WrongKey": Exception,
    "store.formats._common.FormatError": ValueError,
    "store.formats.documents.RecordError": ValueError,
    "store.importing.readers._tree.TreeError": ValueError,
    "store.importing.usage.UnusableUsage": ValueError,
    "store.integrations.agent_framework.ClientManagedHistoryRequired": ValueError,
    "store.integrations.agent_framework.MissingSessionId": ValueError,
    "store.sql.store._NotOpened": ValueError,
    "strategies.base.TokenizerMismatch": ValueError,
    "strategies.bounded.paging.InvalidCursor": ValueError,
    "strategies.bounded.results.ResultBudgetError": ValueError,
    "strategies.errors.ChatledgerError": Exception,
    "strategies.specs.InvalidStrategySpec": ValueError,
    "strategies.summarizers.FakeSummarizerError": RuntimeError,
    "strategies.tokenizers.bpe.UnknownTokenizer": ValueError,
    "strategies.tokenizers.bpe.VocabularyIntegrityError": RuntimeError,
}
"""Every exception class of both packages, by qualified name, with the most specific
built-in exception it derives from (``Exception`` when none)."""


def _modules(package: ModuleType) -> Iterator[ModuleType]:
    yield package
    for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
        if info.name.rsplit(".", 1)[-1] != "__main__":  # running it would start the CLI
            yield importlib.import_module(info.name)


def _exception_classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for package in (store, strategies):
        for module in _modules(package):
            for value in vars(module).values():
                if (
                    isinstance(value, type)
                    and issubclass(value, BaseException)
                    and value.__module__ == module.__name__
                ):
                    found[f"{value.__module__}.{value.__qualname__}"] = value
    return found


def _built_in_base(cls: type[BaseException]) -> type[BaseException]:
    return next(
        base
        for base in cls.__mro__
        if base.__module__ == "builtins" and issubclass(base, BaseException)
    )


FOUND = _exception_classes()


def test_the_walk_finds_every_pinned_class_and_no_other() -> None:
    assert sorted(FOUND) == sorted(BUILT_IN_BASES)


@pytest.mark.parametrize("name", sorted(FOUND))
def test_every_error_is_a_chatledger_error(name: str) -> None:
    assert issubclass(FOUND[name], strategies.errors.ChatledgerError)


@pytest.mark.parametrize("name", sorted(FOUND))
def test_every_error_keeps_its_built_in_base(name: str) -> None:
    assert _built_in_base(FOUND[name]) is BUILT_IN_BASES.get(name)


def test_the_root_is_one_class_wherever_it_is_imported_from() -> None:
    root = strategies.errors.ChatledgerError
    assert store.errors.ChatledgerError is root
    assert store.ChatledgerError is root
    assert strategies.ChatledgerError is root


def test_strategy_errors_become_invalid_input_and_others_pass_unchanged() -> None:
    from strategies.base import TokenizerMismatch
    from strategies.specs import InvalidStrategySpec

    for raised in (TokenizerMismatch("mismatch"), InvalidStrategySpec("bad spec")):
        with pytest.raises(InvalidInput, match=str(raised)) as caught, strategy_errors():
            raise raised
        assert caught.value.__cause__ is raised
    closed = store.errors.StoreClosed("closed")
    with pytest.raises(store.errors.StoreClosed) as same, strategy_errors():
        raise closed
    assert same.value is closed


def test_the_provider_refuses_its_options_with_invalid_input() -> None:
    from store.memory import InMemoryHistoryStore
    from store.provider import TwoPhaseProvider

    backend = InMemoryHistoryStore()
    refused: list[dict[str, object]] = [
        {"max_context_window_tokens": 1000},
        {"reserved_tokens": 10},
        {"compaction": "later"},
        {"compaction": "deferred", "max_pending": 0},
    ]
    for options in refused:
        with pytest.raises(InvalidInput):
            TwoPhaseProvider(backend, **options)  # type: ignore[arg-type]


def test_an_unknown_tokenizer_name_is_a_chatledger_error() -> None:
    from strategies.tokenizers import TiktokenTokenizer, UnknownTokenizer, tokenizer_named

    with pytest.raises(UnknownTokenizer, match="unknown tokenizer 'nope'"):
        tokenizer_named("nope")
    with pytest.raises(strategies.errors.ChatledgerError):
        TiktokenTokenizer("nope")
