"""No input can poison a session, and only the library's own errors come out.

Whatever ``append`` accepts, every read gives back equal, on every backend; what it
refuses raises :class:`InvalidInput` naming the field, before anything is written. Each
case here was a reproduction of a call that used to store data no read could parse, or
to raise something else than a ``ChatledgerError``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store import HistoryStore, InMemoryHistoryStore
from store.contract import HistoryBackend
from store.errors import ChatledgerError, InvalidInput, StoreTimeout
from store.models import Provenance
from store.rules.limits import DEFAULT_LIMITS, Limits
from strategies.messages import FunctionCallContent, FunctionResultContent, Message, TextContent
from strategies.tokenizers import CharacterEstimatorTokenizer

SURROGATE = json.loads('"\\ud800"')  # what any JSON request body can carry


def _unchecked(**fields: Any) -> Message:
    """A message built without validation, as a caller bypassing the model could."""
    values: dict[str, Any] = {
        "contents": [],
        "message_id": "m-raw",
        "author_name": None,
        "created_at": None,
        "metadata": {},
    }
    values.update(fields)
    return Message.model_construct(**values)


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: Message.text_message("user", f"a{SURROGATE}b"), "contents[0].text"),
        (
            lambda: Message(
                role="tool",
                contents=[FunctionResultContent(call_id="c", result={"rows": [SURROGATE]})],
            ),
            "contents[0].result['rows'][0]",
        ),
        (lambda: Message.text_message("user", "x", message_id=SURROGATE), "message_id"),
        (lambda: Message.text_message("user", "x", author_name=SURROGATE), "author_name"),
        (lambda: Message.text_message("user", "x", metadata={"k": SURROGATE}), "metadata"),
    ],
)
def test_the_model_refuses_a_lone_surrogate_naming_the_field(
    build: Callable[[], Message], field: str
) -> None:
    with pytest.raises(ValueError, match=r"lone surrogate|valid string") as info:
        build()
    assert field in str(info.value)


def _deep(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    "message",
    [
        _unchecked(role="user", contents=[TextContent.model_construct(text=SURROGATE, extra={})]),
        _unchecked(role="user", author_name=f"bot{SURROGATE}"),
        _unchecked(role="user", metadata={"k": SURROGATE}),
        Message(role="tool", contents=[FunctionResultContent(call_id="c", result=_deep(200))]),
        Message.text_message("user", "x", metadata={"deep": _deep(DEFAULT_LIMITS.max_json_depth)}),
        Message(role="tool", contents=[FunctionResultContent(call_id="c", result=float("nan"))]),
        Message.text_message("user", "x", metadata={"n": float("inf")}),
        Message(role="tool", contents=[FunctionResultContent(call_id="c", result=10**4301)]),
        Message.text_message("x" * 65, "x", allow_custom_roles=True),
        Message.text_message("user", "x", message_id="m" * 256),
        Message.text_message("user", "x", author_name="a" * 256),
        Message.text_message(
            "user", "x", created_at=datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=5)))
        ),
        _unchecked(
            role="tool",
            contents=[
                FunctionResultContent.model_construct(call_id="c", result=SURROGATE, extra={})
            ],
        ),
        _unchecked(
            role="assistant",
            contents=[
                FunctionCallContent.model_construct(
                    call_id="c", name="f", arguments=f"{{{SURROGATE}}}", extra={}
                )
            ],
        ),
        Message(role="tool", contents=[FunctionResultContent(call_id="c" * 256, result="ok")]),
        Message(role="tool", contents=[FunctionResultContent(call_id="c\x00", result="ok")]),
    ],
    ids=[
        "surrogate-text",
        "surrogate-author",
        "surrogate-metadata",
        "deep-result",
        "deep-metadata",
        "nan",
        "infinity",
        "huge-int",
        "long-role",
        "long-message-id",
        "long-author",
        "year-1-east-of-utc",
        "surrogate-result",
        "surrogate-arguments",
        "long-call-id",
        "nul-call-id",
    ],
)
async def test_what_no_read_could_give_back_is_refused_and_nothing_stored(
    any_store: HistoryBackend, message: Message
) -> None:
    await any_store.append("s", Message.text_message("user", "kept", message_id="first"))
    with pytest.raises(InvalidInput):
        await any_store.append("s", [Message.text_message("user", "also"), message])
    assert [m.message_id for m in await any_store.history("s")] == ["first"]
    assert await any_store.context("s")  # the session still reads


async def test_json_just_within_the_limits_is_kept(any_store: HistoryBackend) -> None:
    deep = _deep(DEFAULT_LIMITS.max_json_depth - 2)
    message = Message(
        role="tool",
        contents=[FunctionResultContent(call_id="c", result={"rows": deep, "n": 10**900})],
        metadata={"deep": _deep(DEFAULT_LIMITS.max_json_depth - 1)},
        message_id="m" * DEFAULT_LIMITS.max_id_length,
    )
    await any_store.append("s", [message])
    [stored] = await any_store.history("s")
    assert stored.message == message
    assert stored.group_id.startswith("group_sha256_")  # too long to prefix, so hashed
    assert len(stored.group_id) <= 255


async def test_the_limits_are_configurable_within_what_the_database_holds(tmp_path: Path) -> None:
    tight = Limits(max_json_depth=3)
    store = InMemoryHistoryStore(tokenizer=CharacterEstimatorTokenizer(), limits=tight)
    with pytest.raises(InvalidInput, match="deeper than 3"):
        await store.append("s", Message.text_message("user", "x", metadata={"a": _deep(3)}))
    with pytest.raises(InvalidInput, match="255"):
        Limits(max_id_length=1000)


HOSTILE: list[tuple[str, Callable[[HistoryBackend], Awaitable[object]]]] = [
    (
        "surrogate session id",
        lambda s: s.append(f"s{SURROGATE}", Message.text_message("user", "x")),
    ),
    ("NUL session id", lambda s: s.history("a\x00b")),
    ("long session id", lambda s: s.append("s" * 256, Message.text_message("user", "x"))),
    ("None messages", lambda s: s.append("s", None)),  # type: ignore[arg-type]
    ("a string as messages", lambda s: s.append("s", "hello")),  # type: ignore[arg-type]
    ("None strategy", lambda s: s.compact("s", None)),  # type: ignore[arg-type]
    ("a number as strategy", lambda s: s.compact("s", 5)),  # type: ignore[arg-type]
    ("bad spec", lambda s: s.compact("s", "truncation:max_n=x")),
    ("limit as text", lambda s: s.history("s", limit="5")),  # type: ignore[arg-type]
    ("negative limit", lambda s: s.sessions(limit=-1)),
    ("after beyond 64 bits", lambda s: s.history("s", after=2**70)),
    ("before as text", lambda s: s.history("s", before="3")),  # type: ignore[arg-type]
    ("phase as a number", lambda s: s.audit(phase=5)),  # type: ignore[arg-type]
    ("since as text", lambda s: s.audit(since="yesterday")),  # type: ignore[arg-type]
    (
        "provenance as text",
        lambda s: s.append("s", Message.text_message("user", "x"), provenance="x"),
    ),  # type: ignore[arg-type]
    ("group ids as text", lambda s: s.pin("s", "group_1")),  # type: ignore[arg-type]
    ("metadata as a list", lambda s: s.set_metadata("s", [1])),  # type: ignore[arg-type]
    ("message id as None", lambda s: s.why("s", None)),  # type: ignore[arg-type]
    ("page size as text", lambda s: _first(s.aiter_history("s", page_size="9"))),  # type: ignore[arg-type]
]


async def _first(messages: AsyncIterator[Any]) -> None:
    async for _ in messages:
        return


@pytest.mark.parametrize(("name", "call"), HOSTILE, ids=[h[0] for h in HOSTILE])
async def test_a_hostile_call_raises_invalid_input(
    any_store: HistoryBackend, name: str, call: Callable[[HistoryBackend], Awaitable[object]]
) -> None:
    await any_store.append("s", Message.text_message("user", "present"))
    with pytest.raises(InvalidInput):
        await call(any_store)


@pytest.mark.parametrize(
    "build",
    [
        lambda: InMemoryHistoryStore(tenant=f"t{SURROGATE}"),
        lambda: InMemoryHistoryStore(tenant="a\x00b"),
        lambda: InMemoryHistoryStore(tokenizer=5),  # type: ignore[arg-type]
        lambda: InMemoryHistoryStore(tokenizer="no-such-encoding"),  # type: ignore[arg-type]
    ],
)
def test_bad_store_arguments_raise_invalid_input(build: Callable[[], object]) -> None:
    with pytest.raises(InvalidInput):
        build()


async def test_a_tokenizer_may_be_given_by_name(tmp_path: Path) -> None:
    store = InMemoryHistoryStore(tokenizer="character_estimator")  # type: ignore[arg-type]
    assert store.tokenizer.name == "character_estimator"


@pytest.mark.parametrize(
    "url", ["not a url", "mysql://root@localhost/db", "sqlite+pysqlcipher:///x.db", ""]
)
async def test_a_url_no_store_can_open_raises_a_chatledger_error(url: str) -> None:
    with pytest.raises(InvalidInput):
        async with HistoryStore.open(url):
            pass


async def test_a_read_blocked_by_an_exclusive_lock_says_so(tmp_path: Path) -> None:
    path = tmp_path / "locked.db"
    async with HistoryStore.open(str(path), tokenizer=CharacterEstimatorTokenizer()) as setup:
        await setup.append("s", Message.text_message("user", "hi"))
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA journal_mode=DELETE")  # an exclusive lock blocks readers too
    holder.execute("BEGIN EXCLUSIVE")
    try:
        async with HistoryStore.open(
            str(path), tokenizer=CharacterEstimatorTokenizer(), timeout=0.3
        ) as store:
            with pytest.raises(StoreTimeout, match="locked"):
                await store.history("s")
    except ChatledgerError as error:  # the open itself may meet the lock first
        assert isinstance(error, StoreTimeout), error
    finally:
        holder.execute("ROLLBACK")
        holder.close()


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    texts=st.lists(st.text(max_size=30), min_size=1, max_size=4),
    metadata=st.dictionaries(
        st.text(max_size=5),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
            lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
            max_leaves=6,
        ),
        max_size=3,
    ),
)
async def test_whatever_append_accepts_every_read_gives_back_equal(
    store: HistoryStore, texts: list[str], metadata: dict[str, Any]
) -> None:
    try:
        batch = [Message.text_message("user", t, metadata=metadata) for t in texts]
    except ValueError:
        return  # the model refused it (a lone surrogate): nothing reached the store
    session = f"s-{batch[0].message_id}"
    try:
        await store.append(session, batch)
    except InvalidInput:
        assert await _absent(store, session)
        return
    assert [m.message for m in await store.history(session)] == batch
    assert await store.context(session) == batch
    async with HistoryStore.open(str(store.engine.url), tokenizer=store.tokenizer) as fresh:
        assert [m.message for m in await fresh.history(session)] == batch


async def _absent(store: HistoryStore, session: str) -> bool:
    return all(s.session_id != session for s in await store.sessions())


def test_provenance_is_a_model() -> None:
    assert Provenance(system="x").system == "x"
