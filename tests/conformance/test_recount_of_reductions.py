"""Recounting a session counts the reduced overlays again, not only the originals."""

from __future__ import annotations

from strategies.messages import Message
from strategies.tokenizers import TiktokenTokenizer, count_message_tokens
from tests.conformance.conftest import Stores
from tests.conformance.toy_strategies import ReduceResults
from tests.groups.conversations import assistant, call, result, tool, user


def _chat() -> list[Message]:
    return [
        user("u1", "what is the weather"),
        assistant("a1", call("c1", "weather")),
        tool("t1", result("c1", "sunny and warm all day long, " * 8)),
        assistant("a2", "it is sunny"),
    ]


async def test_recount_recounts_a_reduced_result(stores: Stores) -> None:
    first = await stores.open()  # the character estimator
    await first.append("s", _chat())
    assert await first.compact("s", ReduceResults()) is not None
    second = await stores.open(tokenizer=TiktokenTokenizer("o200k_base"))
    await second.recount("s")
    stored = next(m for m in await second.history("s") if m.message_id == "t1")
    assert stored.reduced is not None
    assert stored.reduced_token_count == count_message_tokens(stored.reduced, TiktokenTokenizer())
    assert stored.token_count == count_message_tokens(stored.message, TiktokenTokenizer())
    sent = await second.context("s")
    assert sum(second.count_tokens(m) for m in sent) == (await second.session("s")).active_tokens
