"""Messages the storage format's vectors were recorded for (``storage_vectors.json``).

Every content type, with the values its JSON texts escape or write differently: non-ASCII
text, control characters and DEL, lone surrogates (a message holding one is built
without validation: the model refuses it, the hash is still pinned), non-finite and
extreme floats, big integers, nested ``extra`` dicts, timestamps in and out of UTC.

Only :mod:`strategies.messages` is imported, so that the corpus builds the same messages
for the release that recorded the vectors and for this one.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from pydantic import ValidationError

from strategies.messages import (
    Content,
    DataContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    OtherContent,
    ReasoningContent,
    TextContent,
    UriContent,
)

TEXTS = [
    "",
    "plain",
    "x" * 70,
    'q "x" \\ / \n\t\r\b\f \x00 \x01 \x1f \x7f',
    "héllo 日本 \u2028 😀",
    "é" * 70,
    "\ud800",
    "a\udfffb",
]
JSON: list[Any] = [
    None,
    True,
    False,
    0,
    -7,
    10**30,
    1.5,
    -0.0,
    1e300,
    5e-324,
    float("nan"),
    float("inf"),
    float("-inf"),
    "s",
    "ü\ud83d",
    [],
    {},
    [1, "a", None, [True, {"z": 2.5}]],
    {"b": 1, "a": {"z": [], "é": "ü", "n": {"deep": [{"x": None}]}}, "": None},
]
STAMPS = [
    None,
    datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC),
    datetime(2025, 1, 2, 3, 4, 5, 6, tzinfo=timezone(timedelta(hours=5, minutes=30))),
    datetime(2025, 1, 2, 3, 4, 5),  # naive: taken as UTC
    datetime(5, 1, 2, 3, 4, 5, tzinfo=UTC),
]


def contents() -> list[Content]:
    """One content of each type for each text and JSON value above."""
    out: list[Content] = []
    for text in TEXTS:
        out += [
            TextContent(text=text),
            ReasoningContent(text=text or None, payload={"sig": text}),
            FunctionCallContent(call_id=f"c{text}", name=text or "f", arguments=text),
            FunctionResultContent(call_id="c", result=text, is_error=bool(text)),
            DataContent(data=text, media_type=text or None),
            UriContent(uri=text, media_type=None),
            OtherContent(kind=text or "k", payload={"t": text}, call_id=text, pairing="result"),
        ]
    for value in JSON:
        out += [
            FunctionResultContent(call_id="c", result=value, is_error=value is None),
            ReasoningContent(payload=value),
            OtherContent(kind="k", payload={"v": value}, call_id=None, pairing="call"),
            TextContent(text="x", extra={"v": value, "nested": {"v": [value]}}),
            UriContent(uri="https://x/y.png", media_type="image/png", extra={"v": value}),
        ]
        if isinstance(value, dict) or value is None:
            out.append(FunctionCallContent(call_id="c", name="f", arguments=value))
    return out


def _message(**fields: Any) -> Message:
    try:
        return Message(**fields)
    except ValidationError:  # a lone surrogate: built as given
        return Message.model_construct(**fields)


def messages() -> list[Message]:
    """The corpus: each content alone, and mixed messages with every other field."""
    every = contents()
    out = [
        _message(role="tool", contents=[content], message_id=f"m{i}")
        for i, content in enumerate(every)
    ]
    metadata: list[dict[str, Any]] = [
        {},
        {"original_role": "developer", "n": [1, 2.5, {"x": None}]},
        {"é": "日本", "nan": float("nan"), "inf": float("inf"), "big": 10**30},
        {"s": "\ud800"},
    ]
    for i, stamp in enumerate(STAMPS):
        for j, name in enumerate((None, "bot", "é\n", "\udfff")):
            for k, meta in enumerate(metadata):
                start = (i * 16 + j * 4 + k) % len(every)
                out.append(
                    _message(
                        role="assistant",
                        contents=every[start : start + 4],
                        message_id=f"x{i}-{j}-{k}",
                        author_name=name,
                        created_at=stamp,
                        metadata=meta,
                    )
                )
    out.append(Message(role="critic", contents=[], message_id="c", allow_custom_roles=True))
    return out
