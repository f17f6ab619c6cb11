"""One process of a mixed load on one database: appending, compacting, importing or
redacting for a few seconds, each with its own store (its own connections).

``python -m tests.reliability.mixed ROLE URL SECONDS WORKDIR`` runs one role until
``SECONDS`` have passed and prints what it did as one JSON object: the ids it stored
(acknowledged) or redacted, the sessions it imported, and every error it met (none may
happen). ``tests/reliability/test_mixed_processes.py`` starts one process a role and
checks the database afterwards.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from store import HistoryStore
from store.importing import import_sources
from strategies.messages import FunctionCallContent, FunctionResultContent, Message
from strategies.tokenizers import CharacterEstimatorTokenizer

SHARED = ("shared-0", "shared-1")
"""The sessions every role works on."""
SECRETS = 6
"""Messages of each shared session that the redactor erases, one by one."""
WINDOW = "sliding-window:keep_last_turns=2"
PAUSE = 0.02
"""Seconds between two steps of a role: the roles interleave, the volume stays small."""


def secret(session: str, n: int) -> str:
    """The text of secret ``n`` of ``session`` (what must be gone after its redaction)."""
    return f"secret-{session}-{n}-0f3a"


def secret_messages(session: str) -> list[Message]:
    """What the test stores before the processes start: the secrets, in their own turns."""
    out = []
    for n in range(SECRETS):
        out.append(Message.text_message("user", secret(session, n), message_id=f"{session}-s{n}"))
        out.append(Message.text_message("assistant", "noted", message_id=f"{session}-s{n}-a"))
    return out


def _turn(prefix: str) -> list[Message]:
    call = f"{prefix}-c"
    return [
        Message.text_message("user", f"question {prefix}", message_id=f"{prefix}-u"),
        Message(
            role="assistant",
            contents=[FunctionCallContent(call_id=call, name="lookup", arguments={})],
            message_id=f"{prefix}-a",
        ),
        Message(
            role="tool",
            contents=[FunctionResultContent(call_id=call, result="rows " * 40)],
            message_id=f"{prefix}-t",
        ),
        Message.text_message("assistant", f"answer {prefix}", message_id=f"{prefix}-z"),
    ]


async def _append(store: HistoryStore, role: str, deadline: float, out: dict[str, Any]) -> None:
    n = 0
    while time.monotonic() < deadline:
        session = SHARED[n % len(SHARED)]
        turn = _turn(f"{role}-{n}")
        await store.append(session, turn)
        out["stored"].setdefault(session, []).extend(m.message_id for m in turn)
        if role == "compactor":
            await store.compact(session, WINDOW)
        n += 1
        await asyncio.sleep(PAUSE)


async def _import(store: HistoryStore, deadline: float, out: dict[str, Any], work: Path) -> None:
    n = 0
    while time.monotonic() < deadline:
        source = work / f"import-{n}.jsonl"
        lines = [{"id": f"imported-{n}-{k}", "messages": _chat(k)} for k in range(3)]
        source.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
        report = await import_sources(store, [source])
        out["imported"].update({line["id"]: len(line["messages"]) for line in lines})
        out["reports"].append(report.new)
        n += 1
        await asyncio.sleep(PAUSE * 10)


def _chat(k: int) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"imported question {k}"},
        {"role": "assistant", "content": f"imported answer {k}"},
    ]


async def _redact(store: HistoryStore, deadline: float, out: dict[str, Any]) -> None:
    pace = (deadline - time.monotonic()) / (SECRETS + 1)
    for n in range(SECRETS):
        await asyncio.sleep(pace)
        for session in SHARED:
            await store.redact(session, [f"{session}-s{n}"], reason="test")
            out["redacted"].setdefault(session, []).append(f"{session}-s{n}")


async def run(role: str, url: str, seconds: float, work: Path) -> dict[str, Any]:
    """Run ``role`` on ``url`` for ``seconds``; what it did, and its errors."""
    out: dict[str, Any] = {"stored": {}, "imported": {}, "reports": [], "redacted": {}}
    errors: list[str] = []
    deadline = time.monotonic() + seconds
    tokenizer = CharacterEstimatorTokenizer()
    async with HistoryStore.open(url, tokenizer=tokenizer, timeout=30) as store:
        try:
            if role in ("appender", "compactor"):
                await _append(store, role, deadline, out)
            elif role == "importer":
                await _import(store, deadline, out, work)
            elif role == "redactor":
                await _redact(store, deadline, out)
            else:
                raise ValueError(f"unknown role {role!r}")
        except Exception as error:  # every failure is reported; none may happen
            errors.append(f"{role}: {type(error).__name__}: {error}")
    return {**out, "errors": errors}


def main() -> None:
    role, url, seconds, work = sys.argv[1:]
    print(json.dumps(asyncio.run(run(role, url, float(seconds), Path(work)))))


if __name__ == "__main__":
    main()
