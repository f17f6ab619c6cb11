"""A long text is counted a segment at a time (:func:`segments`): the segments end before
a space that follows a non-space, where tiktoken's pre-tokenizers split anyway, so the
count is the whole text's; a stretch without such a space is cut at the segment size."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strategies.tokenizers import tiktoken_tokenizer
from strategies.tokenizers.tiktoken_tokenizer import TiktokenTokenizer, segments

_WORDS = st.sampled_from(
    [
        "alpha",
        "Beta",
        " ",
        "  ",
        "\n",
        "\n\n",
        "\t",
        "42",
        "12345",
        '{"k": 1}',
        "über",
        "日本語",
        "'s",
        "...",
        "/",
        "\r\n",
        " - ",
        "é",
        "<|endoftext|>",
        "xxxxxxxxxxxx",
    ]
)
_TEXTS = st.lists(_WORDS, min_size=1, max_size=400).map(" ".join)


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
@settings(max_examples=60, deadline=None)
@given(text=_TEXTS, size=st.sampled_from([40, 100, 1000]))
def test_a_text_with_spaces_counts_as_a_whole_in_segments(
    encoding: str, text: str, size: int
) -> None:
    parts = list(segments(text, size))
    assert "".join(parts) == text
    assert all(0 < len(part) <= size for part in parts)
    tokenizer = TiktokenTokenizer(encoding)
    whole = len(tokenizer.encoding.encode_ordinary(text))
    cuts = [sum(map(len, parts[: i + 1])) for i in range(len(parts) - 1)]
    exact = all(text[cut] == " " and not text[cut - 1].isspace() for cut in cuts)
    if exact:  # no stretch of the size without a space to cut before
        assert sum(len(tokenizer.encoding.encode_ordinary(p)) for p in parts) == whole
    with mock.patch.object(tiktoken_tokenizer, "SEGMENT_CHARS", size):
        counted = tokenizer.count_tokens(text)
        assert tokenizer.count_many([text, "hi"]) == [counted, 1]
    if exact:
        assert counted == whole


def test_a_run_without_spaces_is_cut_at_the_segment_size() -> None:
    assert [len(part) for part in segments("x" * 25, 10)] == [10, 10, 5]
    assert list(segments("ab cd", 10)) == ["ab cd"]
    assert list(segments("aaaa bbbb cc", 6)) == ["aaaa", " bbbb", " cc"]


def test_a_long_text_is_counted_as_tiktoken_counts_it() -> None:
    tokenizer = TiktokenTokenizer()
    text = "The weather in Paris: sunny, 21 degrees.\n" * 4000  # 164,000 characters
    assert len(text) > tiktoken_tokenizer.SEGMENT_CHARS
    assert tokenizer.count_tokens(text) == len(tokenizer.encoding.encode_ordinary(text))
    assert tokenizer.count_many([text]) == [tokenizer.count_tokens(text)]
