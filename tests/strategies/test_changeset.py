"""ChangeSet.without: a plan less what it does to some groups, a summary dropped whole."""

from __future__ import annotations

from strategies.changeset import ChangeSet, Diagnostic, Exclusion, Reduction, SummaryInsert
from strategies.messages import Message


def _summary(message_id: str, *replaces: str) -> SummaryInsert:
    return SummaryInsert(
        message=Message.text_message("assistant", "summary", message_id=message_id),
        replaces=replaces,
    )


def _reduction(group_id: str) -> Reduction:
    message = Message.text_message("tool", "[reduced]", message_id=f"m_{group_id}")
    return Reduction(group_id, message, "test", tokens_before=10, tokens_after=2)


def test_drops_what_it_does_to_the_groups_and_keeps_the_rest() -> None:
    note = Diagnostic(kind="blocked", strategy="s", message="pinned above the budget")
    changes = ChangeSet(
        exclusions=(Exclusion("g1", "old"), Exclusion("g2", "old")),
        reductions=(_reduction("g1"), _reduction("g3")),
        strategy="s",
        params={"n": 2},
        diagnostics=(note,),
    )
    kept = changes.without({"g1"})
    assert kept.exclusions == (Exclusion("g2", "old"),)
    assert kept.reductions == (_reduction("g3"),)
    assert (kept.strategy, kept.params, kept.diagnostics) == ("s", {"n": 2}, (note,))
    assert changes.without(set()) == changes


def test_a_summary_goes_whole_with_what_the_plan_does_to_it() -> None:
    first = _summary("sum1", "g1", "g2")
    second = _summary("sum2", first.group_id, "g3")  # a summary of the first
    other = _summary("sum3", "g4", "g5")
    changes = ChangeSet(
        summaries=(first, second, other),
        exclusions=(Exclusion(second.group_id, "old"), Exclusion("g6", "old")),
    )
    kept = changes.without({"g2"})
    assert kept.summaries == (other,)
    assert kept.exclusions == (Exclusion("g6", "old"),)
    # g1 and g3 are no longer touched: they stay as they were
    assert kept.touched_group_ids == {"g4", "g5", "g6"}
