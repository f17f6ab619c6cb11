"""The allocator's free memory is given back when a history or context read fetched a
large text, and only then (:mod:`store.sql.drivers.allocator`; ``docs/limits.md``,
"Memory")."""

from __future__ import annotations

import platform
import sys

import pytest

from store import HistoryStore
from store.sql.drivers import allocator
from strategies.messages import FunctionCallContent, FunctionResultContent, Message, TextContent

LARGE = allocator.LARGE_VALUE + 1


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []

    def trim(pad: int) -> int:
        calls.append(pad)
        return 1

    monkeypatch.setattr(allocator, "_TRIM", trim)
    return calls


def _tool_turn(size: int) -> list[Message]:
    call = FunctionCallContent(call_id="c1", name="fetch", arguments="{}")
    result = FunctionResultContent(call_id="c1", result="x" * size)
    return [
        Message(role="assistant", contents=[call], message_id="a1"),
        Message(role="tool", contents=[result], message_id="t1"),
    ]


async def test_a_history_read_of_a_large_result_gives_memory_back_around_decoding(
    store: HistoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _counted(monkeypatch)
    await store.append("s", _tool_turn(LARGE))
    assert calls == []
    read = await store.history("s")
    assert calls == [0, 0]  # the read's buffers, then the texts as read once decoded
    result = read[-1].message.contents[0]
    assert isinstance(result, FunctionResultContent) and len(result.result) == LARGE


async def test_a_context_read_of_a_large_result_gives_memory_back_before_decoding(
    store: HistoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _counted(monkeypatch)
    await store.append("s", _tool_turn(LARGE))
    shown = await store.context("s")
    assert calls == [0]
    result = shown[-1].contents[0]
    assert isinstance(result, FunctionResultContent) and len(result.result) == LARGE
    await store.context("s")  # from the view cache: nothing read
    assert calls == [0]


async def test_an_ordinary_turn_leaves_the_allocator_alone(
    store: HistoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _counted(monkeypatch)
    await store.append("s", [Message(role="user", contents=[TextContent(text="hi")])])
    await store.append("s", _tool_turn(10_000))
    await store.context("s")
    await store.history("s")
    assert calls == []


def test_on_linux_with_glibc_the_trim_is_found() -> None:
    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        pytest.skip("malloc_trim is glibc's")
    assert allocator._TRIM is not None
