"""A writer process for the concurrency tests.

Run as ``python tests/store/writer.py URL SESSION WRITER COUNT``, or through
:func:`run` as a ``multiprocessing`` target. Appends ``COUNT``
rounds to ``SESSION`` as writer ``WRITER``: a user message, an assistant call and its
result, each in its own transaction, so that writers interleave.
"""

from __future__ import annotations

import asyncio
import sys

from store import HistoryStore
from strategies.messages import FunctionCallContent, FunctionResultContent, Message
from strategies.tokenizers import CharacterEstimatorTokenizer


def round_messages(writer: str, index: int) -> list[list[Message]]:
    """The appends of one round of one writer (message ids unique per writer and round)."""
    base = f"{writer}-{index}"
    return [
        [Message.text_message("user", f"question {base}", message_id=f"{base}-u")],
        [
            Message(
                role="assistant",
                message_id=f"{base}-a",
                contents=[FunctionCallContent(call_id=f"{base}-c", name="lookup")],
            )
        ],
        [
            Message(
                role="tool",
                message_id=f"{base}-t",
                contents=[FunctionResultContent(call_id=f"{base}-c", result="ok")],
            )
        ],
    ]


async def write(store: HistoryStore, session_id: str, writer: str, count: int) -> None:
    """Append ``count`` rounds as ``writer``."""
    for index in range(count):
        for batch in round_messages(writer, index):
            await store.append(session_id, batch)


async def main(url: str, session_id: str, writer: str, count: int) -> None:
    async with HistoryStore.open(url, tokenizer=CharacterEstimatorTokenizer()) as store:
        await write(store, session_id, writer, count)


def run(url: str, session_id: str, writer: str, count: int) -> None:
    """Process entry point (``multiprocessing`` target)."""
    asyncio.run(main(url, session_id, writer, count))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
