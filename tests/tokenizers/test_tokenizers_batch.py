"""Counting many texts in one call (``count_many``), and the texts a message is counted by."""

from __future__ import annotations

import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strategies.messages import (
    DataContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    OtherContent,
    ReasoningContent,
    TextContent,
)
from strategies.tokenizers import (
    BatchTokenizer,
    CharacterEstimatorTokenizer,
    TiktokenTokenizer,
    count_message_tokens,
    count_texts,
    message_texts,
)

# Texts that meet tiktoken's edges: special-token text (the separator itself, another
# special, fragments of both), lone surrogates on either side of a join, whitespace runs
# that a join could merge, and a long text.
EDGES = [
    "<|endoftext|>",
    "a<|endoftext|>b",
    "<|endoftext",
    "|>",
    "<|endofprompt|> hi",
    "\ud800",
    "x\udfff",
    "\ud83d",
    "\ude00z",
    " ",
    "  ",
    "\n\n",
    "hello",
    "hello " * 300,
    "é" * 41,
    "日本語のテキスト",
    '{"k": [1, 2.5, null]}',
]


def _one_by_one(tokenizer: TiktokenTokenizer, texts: list[str]) -> list[int]:
    return [len(tokenizer.encoding.encode_ordinary(text)) for text in texts]


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_count_many_equals_counting_each_text_alone(encoding: str) -> None:
    tokenizer = TiktokenTokenizer(encoding)
    texts = [EDGES[(i * 7) % len(EDGES)] + EDGES[i % len(EDGES)] for i in range(200)] + EDGES
    assert tokenizer.count_many(texts) == _one_by_one(TiktokenTokenizer(encoding), texts)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(EDGES), st.text(max_size=60)), max_size=12))
def test_count_many_matches_count_tokens(texts: list[str]) -> None:
    tokenizer = TiktokenTokenizer()
    assert tokenizer.count_many(texts) == [tokenizer.count_tokens(text) for text in texts]


def test_count_many_splits_calls_into_tiktoken_by_size(monkeypatch: pytest.MonkeyPatch) -> None:
    import strategies.tokenizers.tiktoken_tokenizer as module

    monkeypatch.setattr(module, "_JOINED_CHARS", 64)
    tokenizer = TiktokenTokenizer()
    calls: list[str] = []
    encode = tokenizer._encode_buffer
    assert encode is not None  # the tiktoken this project requires has it

    def recording(text: str, allowed: object) -> object:
        calls.append(text)
        return encode(text, allowed)

    monkeypatch.setattr(tokenizer, "_encode_buffer", recording)
    texts = [f"message number {i} says something long enough" for i in range(10)]
    assert tokenizer.count_many(texts) == _one_by_one(TiktokenTokenizer(), texts)
    assert len(calls) == 5  # two texts (over 64 characters) a call


def test_count_many_without_the_token_buffer_counts_alike() -> None:
    """A tiktoken without ``encode_to_tiktoken_buffer``: the tokens come as a list."""
    tokenizer = TiktokenTokenizer()
    tokenizer._encode_buffer = None
    texts = [EDGES[(i * 5) % len(EDGES)] + EDGES[i % len(EDGES)] for i in range(100)] + EDGES
    assert tokenizer.count_many(texts) == _one_by_one(TiktokenTokenizer(), texts)


def test_a_separator_across_two_tokens_bytes_is_not_a_boundary() -> None:
    from array import array

    from strategies.tokenizers.tiktoken_tokenizer import _split_buffer

    separator = 0x00030D3F
    low, high = separator & 0xFFFF, separator >> 16
    # the separator's bytes start in the middle of the first token and end in the second
    first = array("I", [(low << 16) | 0x0101, 0x0202_0000 | high])
    assert separator.to_bytes(4, sys.byteorder) in first.tobytes()
    tokens = array("I", [*first, separator, 7, 8, 9, separator, 5]).tobytes()
    counts = [0, 0, 0]
    _split_buffer(tokens, separator.to_bytes(4, sys.byteorder), [0, 1, 2], counts)
    assert counts == [2, 3, 1]


def test_count_many_keeps_counts_of_short_texts() -> None:
    tokenizer = TiktokenTokenizer()
    tokenizer.count_many(["search_docs", "x" * 200])
    assert tokenizer._short == {"search_docs": tokenizer.count_tokens("search_docs")}


def test_count_many_of_nothing() -> None:
    assert TiktokenTokenizer().count_many([]) == []


def test_only_tiktoken_counts_in_batches() -> None:
    assert isinstance(TiktokenTokenizer(), BatchTokenizer)
    assert not isinstance(CharacterEstimatorTokenizer(), BatchTokenizer)
    assert count_texts(["abcdefgh", "ab"], CharacterEstimatorTokenizer()) == [2, 1]


MESSAGES = [
    Message(role="user", contents=[TextContent(text="hello there")]),
    Message(role="assistant", author_name="Ada", contents=[TextContent(text="")]),
    Message(
        role="assistant",
        contents=[
            ReasoningContent(text="thinking", payload="opaque"),
            FunctionCallContent(call_id="c1", name="search", arguments={"q": "otters", "n": 3}),
            FunctionCallContent(call_id="c2", name="read", arguments='{"path": "a"}'),
        ],
    ),
    Message(
        role="tool",
        contents=[
            FunctionResultContent(call_id="c1", result=["a", 1, None]),
            FunctionResultContent(call_id="c2", result=None),
            FunctionResultContent(call_id="c3", result="plain"),
        ],
    ),
    Message(
        role="user",
        contents=[
            DataContent(data="iVBORw0KGgo=", media_type="image/png"),
            OtherContent(
                kind="mcp_server_tool_call",
                pairing="call",
                call_id="m1",
                payload={"name": "look", "args": {"uri": "data:image/png;base64,AAAA", "k": 2}},
            ),
        ],
    ),
]


@pytest.mark.parametrize("message", MESSAGES)
def test_message_texts_add_up_to_the_message_count(message: Message) -> None:
    tokenizer = TiktokenTokenizer()
    fixed, texts = message_texts(message)
    assert all(texts)
    assert fixed + sum(tokenizer.count_many(texts)) == count_message_tokens(message, tokenizer)
