"""The recall tool's text rules: the mark and its quotes, the cursor, the note after a
summary."""

from __future__ import annotations

import json

import pytest

from store.errors import InvalidInput
from store.formats import AF_ANNOTATIONS_KEY
from store.search.recall import (
    RecallCursor,
    RecallEntry,
    decode_recall_cursor,
    encode_recall_cursor,
    is_recall_result,
    is_summary,
    quoted_ids,
    quoting,
    recall_quotes,
    recall_result,
    with_recall_note,
    without_recall_results,
)
from strategies.messages import FunctionResultContent, Message, TextContent
from strategies.tool_result import SUMMARY_METADATA_KEY

ENTRIES = [
    RecallEntry("m1", {"role": "user", "text": "a"}, ("evt_1", "2026-01-01T00:00:00Z")),
    RecallEntry("m2", {"role": "tool", "text": "b"}),
]


def test_a_result_is_marked_first_and_lists_what_it_quotes() -> None:
    text = recall_result(ENTRIES, "x1.abc.def")
    assert text.startswith('{"chatledger_recall":{"quotes":["m1","m2"]}')
    assert is_recall_result(text) and is_recall_result(json.loads(text))
    assert quoted_ids(text) == quoted_ids(json.loads(text)) == ["m1", "m2"]
    assert json.loads(text)["excluded_at"] == {"evt_1": "2026-01-01T00:00:00Z"}
    assert json.loads(text)["next_cursor"] == "x1.abc.def"


@pytest.mark.parametrize(
    "value",
    [
        "recall refused: bad",
        '{"hits":[],"chatledger_recall":{"quotes":[]}}',
        '{"chatledger_recall":{"quotes":"m1"}}',
        '{"chatledger_recall":',
        {"chatledger_recall": []},
        None,
        42,
        ["chatledger_recall"],
    ],
)
def test_anything_else_is_no_recall_result_and_quotes_nothing(value: object) -> None:
    assert not is_recall_result(value)
    assert quoted_ids(value) == []


def test_the_quotes_of_a_message_are_those_of_its_recall_results() -> None:
    message = Message(
        role="tool",
        contents=[
            FunctionResultContent(call_id="c1", result=recall_result(ENTRIES, None)),
            FunctionResultContent(call_id="c2", result="plain"),
            FunctionResultContent(call_id="c3", result=json.loads(recall_result(ENTRIES, None))),
        ],
    )
    assert recall_quotes(message) == ["m1", "m2"]
    assert recall_quotes(Message.text_message("user", recall_result(ENTRIES, None))) == []
    indexed = without_recall_results(message)
    assert [getattr(c, "call_id", None) for c in indexed.contents] == ["c2"]
    assert indexed.message_id == message.message_id
    plain = Message.text_message("user", "m1")
    assert without_recall_results(plain) is plain
    assert quoting([plain, message], ["m2", "m9"]) == [message.message_id]
    assert quoting([plain, message], ["m9"]) == []


@pytest.mark.parametrize(
    "cursor",
    [RecallCursor("excluded", "abc.def"), RecallCursor("rest", "g.h"), RecallCursor("rest")],
)
def test_a_cursor_reads_back(cursor: RecallCursor) -> None:
    assert decode_recall_cursor(encode_recall_cursor(cursor, "apricot"), "apricot") == cursor


@pytest.mark.parametrize("text", ["", "x1", "x1~", "x1~abc", "q1.abc", "x1-abc", 3, None])
def test_a_cursor_not_issued_by_a_recall_is_refused(text: object) -> None:
    with pytest.raises(InvalidInput, match="invalid cursor"):
        decode_recall_cursor(text, "apricot")


def test_the_start_of_the_rest_belongs_to_its_query() -> None:
    start = encode_recall_cursor(RecallCursor("rest"), "apricot")
    with pytest.raises(InvalidInput, match="another query"):
        decode_recall_cursor(start, "plum")


def _summary() -> Message:
    return Message.text_message(
        "assistant", "They spoke of fruit.", metadata={"summary_of_group_ids": ["g1"]}
    )


def test_the_note_follows_each_summary_and_nothing_else() -> None:
    summary = _summary()
    imported = Message.text_message(
        "assistant", "Imported.", metadata={AF_ANNOTATIONS_KEY: {"_summary_of_group_ids": ["x"]}}
    )
    nested = Message.text_message(
        "assistant",
        "[Tool results: …]",
        metadata={SUMMARY_METADATA_KEY: {"summary_of_group_ids": ["g"]}},
    )
    plain = Message.text_message("user", "hello")
    sent = with_recall_note([plain, summary, imported, nested], "Recall it.")
    assert sent[0] is plain
    for before, after in zip([summary, imported, nested], sent[1:], strict=True):
        assert after.message_id == before.message_id and after.metadata == before.metadata
        assert len(after.contents) == len(before.contents)
        assert after.text == f"{before.text}\n\nRecall it."
    assert summary.text == "They spoke of fruit."
    textless = Message(role="assistant", contents=[], metadata=summary.metadata)
    assert with_recall_note([textless], "R.")[0].contents == [TextContent(text="R.")]
    assert with_recall_note([summary], None) == [summary]
    assert [is_summary(m) for m in (plain, summary, imported)] == [False, True, True]
