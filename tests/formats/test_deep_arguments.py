"""Call arguments kept as JSON text that nests deeper than any store keeps are written
out as text (``{"input": text}``), never parsed into a RecursionError: the formats that
want an object (Anthropic's ``input``, LangChain's ``args``) and ``chatledger export``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from store import HistoryStore
from store.formats import to_anthropic, to_langchain
from strategies.messages import FunctionCallContent, FunctionResultContent, Message
from tests.cli.helpers import invoke, run_api

DEEP = {
    "past-the-bound": json.dumps(json.loads("[" * 200 + "]" * 200)),
    "past-the-parser": "[" * 100_000 + "]" * 100_000,
}


def _turn(arguments: str) -> list[Message]:
    return [
        Message.text_message("user", "go"),
        Message(
            role="assistant",
            contents=[FunctionCallContent(call_id="c1", name="t", arguments=arguments)],
        ),
        Message(role="tool", contents=[FunctionResultContent(call_id="c1", result="ok")]),
    ]


def _anthropic_input(arguments: str) -> Any:
    blocks = [
        m["content"] for m in to_anthropic(_turn(arguments)) if isinstance(m["content"], list)
    ]
    (call,) = [b for each in blocks for b in each if b.get("type") == "tool_use"]
    return call["input"]


def _langchain_args(arguments: str) -> Any:
    (ai,) = [m for m in to_langchain(_turn(arguments)) if m["type"] == "ai"]
    return ai["data"]["tool_calls"][0]["args"]


@pytest.mark.parametrize("deep", sorted(DEEP))
@pytest.mark.parametrize(
    "written", [_anthropic_input, _langchain_args], ids=["anthropic", "langchain"]
)
def test_deep_arguments_are_written_as_text(deep: str, written: Any) -> None:
    assert written(DEEP[deep]) == {"input": DEEP[deep]}
    assert written('{"city": "Paris"}') == {"city": "Paris"}  # an object is still parsed


@pytest.mark.parametrize("fmt", ["anthropic", "langchain"])
def test_export_of_deep_arguments_succeeds(tmp_path: Path, fmt: str) -> None:
    url = f"sqlite:///{tmp_path}/x.db"

    async def fill(store: HistoryStore) -> None:
        await store.append("s", _turn(DEEP["past-the-parser"]))

    run_api(url, fill)
    result = invoke("export", "s", "--format", fmt, "--url", url)
    assert result.returncode == 0, result.stderr
    assert "RecursionError" not in result.stderr
