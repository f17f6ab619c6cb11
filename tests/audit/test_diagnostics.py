"""ChangeSet diagnostics: pure data, a default that asks nothing of a strategy, passed on
by compositions."""

from __future__ import annotations

from strategies import Diagnostic, PipelineStrategy, SummarizationStrategy, TruncationStrategy
from strategies.changeset import ChangeSet
from strategies.messages import Message
from strategies.summarizers import FakeSummarizer
from strategies.tokenizers import CharacterEstimatorTokenizer
from strategies.view import View


def _view(turns: int) -> View:
    messages: list[Message] = []
    for index in range(turns):
        messages.append(Message.text_message("user", f"question {index} " + "word " * 20))
        messages.append(Message.text_message("assistant", f"answer {index} " + "text " * 20))
    return View.from_messages(messages, CharacterEstimatorTokenizer())


def test_a_change_set_has_no_diagnostics_by_default() -> None:
    assert ChangeSet().diagnostics == () and ChangeSet().is_empty


def test_a_diagnostic_round_trips_through_json() -> None:
    note = Diagnostic(kind="blocked", strategy="S", message="m", tokens=10, budget=5)
    data = note.as_json()
    assert data == {
        "kind": "blocked",
        "strategy": "S",
        "message": "m",
        "tokens": 10,
        "budget": 5,
        "unit": "tokens",
    }
    assert Diagnostic.from_json({**data, "later_field": 1}) == note


def test_chaining_keeps_each_diagnostic_once() -> None:
    note = Diagnostic(kind="failed", strategy="S", message="m")
    first = ChangeSet().with_diagnostics(note)
    chained = first.then(first).then(ChangeSet().with_diagnostics(None))
    assert chained.diagnostics == (note,)


async def test_a_pipeline_planned_twice_reports_a_failure_once() -> None:
    failing = SummarizationStrategy(client=FakeSummarizer(fail="error"), target_count=2)
    pipeline = PipelineStrategy(failing, TruncationStrategy(max_n=3, compact_to=2))
    changes = await pipeline.plan(_view(6))
    assert not changes.is_empty  # the truncation applied
    assert [d.kind for d in changes.diagnostics] == ["failed"]


async def test_truncation_in_message_mode_reports_messages() -> None:
    view = _view(1)  # one user and one assistant group, the user group protected
    changes = await TruncationStrategy(max_n=1, compact_to=1).plan(view)
    [note] = changes.diagnostics
    assert note.kind == "blocked" and note.unit == "messages" and note.budget == 1
    assert note.tokens == 2  # messages: both groups are protected
