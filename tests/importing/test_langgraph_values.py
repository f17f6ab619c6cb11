"""LangGraph's stored values decoded without LangGraph (``readers/_serde.py``): every
type tag of ``JsonPlusSerializer``, LangChain messages in both the MessagePack and the
older ``lc`` JSON form, and the tags that are refused (``pickle``, unknown)."""

from __future__ import annotations

import json
import pickle

import msgpack
import pytest

from store.errors import InvalidSource
from store.importing.readers._serde import PICKLED, decode, is_message

HUMAN = {"content": "hi", "type": "human", "id": "h-1", "additional_kwargs": {}}


def _ext(code: int, value: object) -> msgpack.ExtType:
    return msgpack.ExtType(code, msgpack.packb(value))


def test_a_msgpack_message_is_its_message_to_dict_form() -> None:
    packed = msgpack.packb(
        [
            _ext(
                5, ["langchain_core.messages.human", "HumanMessage", HUMAN, "model_validate_json"]
            ),
            _ext(
                2,
                [
                    "langchain_core.messages.tool",
                    "ToolMessage",
                    {"content": "ok", "tool_call_id": "c"},
                ],
            ),
            _ext(3, ["datetime", "datetime", "2025-01-02T03:04:05", "fromisoformat"]),
            _ext(7, {"inner": [1, 2]}),
        ]
    )
    human, tool, moment, snapshot = decode("msgpack", packed, "db", "here")
    assert human == {"type": "human", "data": HUMAN}
    assert tool == {"type": "tool", "data": {"content": "ok", "tool_call_id": "c", "type": "tool"}}
    assert moment == "2025-01-02T03:04:05"  # an object is its data, never constructed
    assert snapshot == {"inner": [1, 2]}
    assert is_message(human) and is_message(tool) and not is_message(snapshot)


def test_an_lc_json_message_is_its_message_to_dict_form() -> None:
    text = json.dumps(
        [
            {
                "lc": 1,
                "type": "constructor",
                "id": ["langchain", "schema", "messages", "AIMessage"],
                "kwargs": {"content": "yes", "id": "a-1"},
            },
            {"lc": 1, "type": "constructor", "id": ["some", "Thing"], "kwargs": {"x": 1}},
        ]
    )
    assert decode("json", text.encode(), "db", "here") == [
        {"type": "ai", "data": {"content": "yes", "id": "a-1", "type": "ai"}},
        {"x": 1},
    ]


def test_plain_tags() -> None:
    assert decode("null", b"", "db", "here") is None
    assert decode("empty", None, "db", "here") is None
    assert decode("bytes", b"\x00\x01", "db", "here") == b"\x00\x01"
    assert decode("bytearray", b"\x02", "db", "here") == b"\x02"


@pytest.mark.parametrize(
    ("kind", "data", "reason"),
    [
        ("pickle", pickle.dumps({"a": 1}), PICKLED),
        ("marshal", b"x", "a value of unknown serialization type 'marshal'"),
        ("msgpack", msgpack.packb({"a": "b" * 50})[:20], "a msgpack value that does not decode"),
        ("json", b"{", "a json value that does not decode"),
    ],
)
def test_refused_values_name_the_place(kind: str, data: bytes, reason: str) -> None:
    with pytest.raises(InvalidSource) as refused:
        decode(kind, data, "lg.db", "thread t checkpoint c")
    assert str(refused.value).startswith("lg.db: thread t checkpoint c: " + reason)
