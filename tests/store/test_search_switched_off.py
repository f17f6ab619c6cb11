"""A store that read its database's cursor key once finds search off, in one line, when
another process turned it off since; and finds again once it is back on."""

from __future__ import annotations

import pytest

from store import HistoryStore
from store.errors import InvalidInput
from store.sql.search.index import SEARCH_OFF, switch_search
from strategies.messages import Message
from strategies.tokenizers import CharacterEstimatorTokenizer


async def test_search_turned_off_elsewhere_is_said_in_one_line(db_url: str) -> None:
    async with HistoryStore.open(db_url, tokenizer=CharacterEstimatorTokenizer()) as store:
        await store.append(
            "s", [Message.text_message("user", "the latency report", message_id="m")]
        )
        assert [h.message_id for h in (await store.search("latency")).hits] == ["m"]
        async with HistoryStore.open(db_url) as other:  # another store, as another process
            await switch_search(other.engine, False)
            with pytest.raises(InvalidInput) as refused:
                await store.search("latency")
            assert str(refused.value) == SEARCH_OFF
            await switch_search(other.engine, True)
        assert [h.message_id for h in (await store.search("latency")).hits] == ["m"]
