"""A session counted with one tokenizer: another is refused until the session is recounted."""

from __future__ import annotations

import pytest

from store.errors import InvalidInput
from strategies.messages import Message
from strategies.tokenizers import TiktokenTokenizer, count_message_tokens
from tests.conformance.conftest import Stores
from tests.groups.conversations import assistant, call, result, tool, user


def _chat() -> list[Message]:
    return [
        user("u1", "what is the weather"),
        assistant("a1", call("c1", "weather")),
        tool("t1", result("c1", "sunny")),
        assistant("a2", "a fairly long sentence " * 5),
    ]


async def test_tokenizer_mismatch_and_recount(stores: Stores) -> None:
    first = await stores.open()  # the character estimator
    await first.append("s", _chat())
    estimated = (await first.session("s")).stored_tokens
    second = await stores.open(tokenizer=TiktokenTokenizer("o200k_base"))
    with pytest.raises(InvalidInput, match="recount") as info:
        await second.append("s", [user("u9", "more")])
    assert "character" in str(info.value).lower() and "o200k_base" in str(info.value)
    with pytest.raises(InvalidInput):
        await second.context("s")
    recounted = await second.recount("s")
    assert recounted.tokenizer == "o200k_base"
    expected = sum(second.count_tokens(m) for m in _chat())
    assert recounted.stored_tokens == recounted.active_tokens == expected
    assert recounted.stored_tokens != estimated
    for stored in await second.history("s"):
        assert stored.token_count == count_message_tokens(stored.message, TiktokenTokenizer())
    await second.append("s", [user("u9", "more")])
    assert len(await second.history("s")) == len(_chat()) + 1
