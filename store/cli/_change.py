"""The commands that change a session: ``compact``, ``restore``, ``pin``, ``unpin``,
``delete`` and ``recount``.

They open an existing database only (nothing is created). ``compact --dry-run`` is a
what-if for any strategy on the stored history: it shows, group by group, what would
be excluded, summarized or reduced and the tokens before and after, and writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from store.cli._common import (
    CliError,
    confirm,
    emit_json,
    json_option,
    session_tokenizer,
    strategy_option_value,
    tenant_option,
    tokenizer_option_value,
    url_option,
    with_store,
    yes_option,
)
from store.cli._output import echo, number, print_table, quantity, terminal_width
from store.cli._render import dry_run_table, event_outcome, short_strategy

if TYPE_CHECKING:
    from store.contract import HistoryBackend
    from store.models import CompactionEvent, SessionInfo
    from strategies.changeset import ChangeSet
    from strategies.view import View

__all__ = ["compact", "delete", "pin", "recount", "restore", "title", "unpin"]


@dataclass(frozen=True)
class WhatIf:
    """What a change set would do to a session's active view, group by group."""

    session_id: str
    strategy: str
    tokens_before: int
    tokens_after: int
    groups: list[dict[str, Any]]
    known: frozenset[str] = frozenset()
    """The session's group ids, when a terminal may shorten them (else empty)."""

    def as_json(self) -> dict[str, Any]:
        """The ``compact --dry-run --json`` object."""
        return {
            "session_id": self.session_id,
            "strategy": self.strategy,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "groups": self.groups,
        }


def what_if(session_id: str, spec: str, view: View, changes: ChangeSet, count: Any) -> WhatIf:
    """Describe ``changes`` planned on ``view`` (``count`` counts a new summary)."""
    by_id = {g.group_id: g for g in view.groups}
    groups: dict[str, dict[str, Any]] = {}

    def row(group_id: str, action: str, after: int) -> None:
        group = by_id.get(group_id)
        groups[group_id] = {
            "group_id": group_id,
            "kind": group.kind if group is not None else "summary",
            "action": action,
            "tokens_before": group.token_count if group is not None else 0,
            "tokens_after": after,
        }

    for summary in changes.summaries:
        for replaced in summary.replaces:
            row(replaced, f"summarized into {summary.group_id}", 0)
        row(
            summary.group_id,
            f"new summary of {len(summary.replaces)} groups",
            count(summary.message),
        )
    for exclusion in changes.exclusions:
        if exclusion.group_id not in groups:
            row(exclusion.group_id, f"excluded: {exclusion.reason}", 0)
    for reduction in changes.reductions:
        group = by_id.get(reduction.group_id)
        before = group.token_count if group is not None else reduction.tokens_before
        saved = reduction.tokens_before - reduction.tokens_after
        current = groups.get(reduction.group_id, {}).get("tokens_after", before)
        row(reduction.group_id, f"reduced: {reduction.reason}", max(0, current - saved))
    changed = sum(g["tokens_before"] - g["tokens_after"] for g in groups.values())
    ordered = sorted(
        groups.values(),
        key=lambda g: by_id[g["group_id"]].order_key if g["group_id"] in by_id else (0, 0),
    )
    return WhatIf(session_id, spec, view.token_count, view.token_count - changed, ordered)


@click.command()
@click.argument("session_id", metavar="SESSION")
@click.option(
    "--strategy",
    "spec",
    metavar="SPEC",
    help="The strategy: name[:key=value,...], e.g. truncation:max_n=40,compact_to=20.",
)
@click.option(
    "--reason",
    metavar="WHY",
    help="Ask for compaction, saying why: with --strategy it runs now, whatever the "
    "strategy's triggers say; without, the session's next compaction runs so.",
)
@click.option(
    "--focus",
    metavar="WHAT",
    help="What a summary should keep (with --reason; passed to a summarizer that takes it).",
)
@click.option("--dry-run", is_flag=True, help="Show what it would change; write nothing.")
@url_option
@tenant_option
@json_option
def compact(
    session_id: str,
    spec: str | None,
    reason: str | None,
    focus: str | None,
    dry_run: bool,
    url: str | None,
    tenant: str,
    as_json: bool,
) -> None:
    """Compact a session now, see what a strategy would do, or ask for compaction.

    --strategy compacts now (--dry-run: a what-if); --reason asks for compaction: now
    with --strategy, else at the session's next compaction."""
    if focus is not None and reason is None:
        reason = "manual"
    if reason is not None:
        if dry_run:
            raise click.UsageError(
                "--dry-run shows a strategy's own plan: drop --reason and --focus"
            )
        _request(url, tenant, session_id, spec, reason, focus, as_json)
        return
    if spec is None:
        raise CliError(
            "give --strategy SPEC to compact now, or --reason WHY to ask for it", exit_code=2
        )
    strategy_option_value(spec)
    if dry_run:
        _dry_run(url, tenant, session_id, spec, as_json)
        return

    async def action(store: HistoryBackend) -> CompactionEvent | None:
        await store.session(session_id)  # SessionNotFound for an unknown id
        return await store.compact(session_id, spec, phase="manual")

    event = with_store(url, tenant, action, tokenizer=session_tokenizer(url, tenant, session_id))
    _print_event(event, spec, as_json)


def _print_event(event: CompactionEvent | None, spec: str, as_json: bool) -> None:
    if as_json:
        emit_json(event)
    elif event is None:
        echo(f"Nothing to compact: {short_strategy(spec.split(':')[0])} changes nothing now.")
    elif event.outcome != "applied":
        echo(f"event {event.id}: {event_outcome(event)}; nothing changed")
    else:
        asked = "" if event.reason is None else f", asked for: {event.reason}"
        echo(
            f"event {event.id}: {event_outcome(event)}; tokens {number(event.tokens_before)} → "
            f"{number(event.tokens_after)} (saved {number(event.tokens_saved)}{asked})"
        )


def _request(
    url: str | None,
    tenant: str,
    session_id: str,
    spec: str | None,
    reason: str,
    focus: str | None,
    as_json: bool,
) -> None:
    """``compact --reason``: ask for compaction, now with ``--strategy``, else at the
    session's next compaction."""
    if spec is not None:
        strategy_option_value(spec)

    async def action(store: HistoryBackend) -> CompactionEvent | None:
        await store.session(session_id)  # SessionNotFound for an unknown id
        if spec is None:
            return await store.request_compaction(session_id, reason=reason, focus=focus)
        return await store.request_compaction(
            session_id, reason=reason, focus=focus, now=True, strategy=spec
        )

    event = with_store(url, tenant, action, tokenizer=session_tokenizer(url, tenant, session_id))
    if spec is not None:
        _print_event(event, spec, as_json)
    elif as_json:
        emit_json({"session_id": session_id, "requested": True, "reason": reason, "focus": focus})
    else:
        echo(f"Compaction asked for in {session_id} ({reason}): the next one runs it.")


def _dry_run(url: str | None, tenant: str, session_id: str, spec: str, as_json: bool) -> None:
    async def action(store: HistoryBackend) -> WhatIf:
        view = await store.view(session_id)
        changes = await store.compact(session_id, spec, dry_run=True)
        found = what_if(session_id, spec, view, changes, store.count_tokens)
        if as_json or terminal_width() is None:
            return found
        from dataclasses import replace

        from store.cli._ids import read_ids

        return replace(found, known=(await read_ids(store, session_id)).groups)

    result = with_store(url, tenant, action, tokenizer=session_tokenizer(url, tenant, session_id))
    if as_json:
        emit_json(result.as_json())
        return
    actions = {g["group_id"]: g["action"] for g in result.groups}
    kinds = {g["group_id"]: g["kind"] for g in result.groups}
    tokens = {g["group_id"]: (g["tokens_before"], g["tokens_after"]) for g in result.groups}
    title = f"What {spec} would change in {session_id} (dry run: nothing written)"
    table = dry_run_table(title, actions, kinds, tokens, result.known)
    print_table(table, empty=f"{spec} would change nothing.")
    echo(
        f"active tokens {number(result.tokens_before)} → {number(result.tokens_after)}"
        f" ({number(result.tokens_before - result.tokens_after)} fewer)"
    )


@dataclass(frozen=True)
class Restored:
    """What a restore did, and where it leaves the session against its budget."""

    event: CompactionEvent | None
    active_tokens: int
    budget: int | None
    budget_event: CompactionEvent | None
    pinned: list[str]
    """The restored groups left pinned (none with ``--no-pin``)."""


async def _budget(store: HistoryBackend, session_id: str) -> tuple[int | None, Any]:
    """The input budget of the session's last compaction whose strategy has one."""
    from strategies.context_window import ContextWindowCompactionStrategy
    from strategies.specs import strategy_from_params

    for event in await store.audit(session_id, limit=50):
        if event.phase not in ("after_run", "manual"):
            continue
        strategy = strategy_from_params(event.strategy, event.params)
        if isinstance(strategy, ContextWindowCompactionStrategy):
            return strategy.input_budget_tokens, event
    return None, None


@click.command()
@click.argument("session_id", metavar="SESSION")
@click.option(
    "--group", "groups", multiple=True, metavar="GROUP", help="A group to restore (repeatable)."
)
@click.option("--event", metavar="EVENT", help="Undo this event.")
@click.option(
    "--no-pin",
    is_flag=True,
    help="Leave the restored groups unpinned (strategies may exclude them).",
)
@url_option
@tenant_option
@json_option
def restore(
    session_id: str,
    groups: tuple[str, ...],
    event: str | None,
    no_pin: bool,
    url: str | None,
    tenant: str,
    as_json: bool,
) -> None:
    """Bring excluded groups back (pinned), or undo an event.

    GROUP and EVENT are ids or unique starts of ids. The groups brought back are pinned
    (no strategy excludes them until `chatledger unpin`); --no-pin leaves them unpinned.
    """
    if bool(groups) == (event is not None):
        raise CliError("give --group GROUP (one or more) or --event EVENT", exit_code=2)

    async def action(store: HistoryBackend) -> Restored:
        from store.cli._ids import event_id, group_ids

        await store.session(session_id)  # SessionNotFound for an unknown id
        chosen = await group_ids(store, session_id, groups) if groups else None
        undone = await event_id(store, session_id, event) if event is not None else None
        done = await store.restore(session_id, group_ids=chosen, event_id=undone)
        pinned: list[str] = []
        if done is not None and done.restored:
            if no_pin:
                await store.unpin(session_id, done.restored)
            else:
                view = await store.view(session_id)
                held = {g.group_id for g in view.groups if g.pinned}
                pinned = [g for g in done.restored if g in held]
        budget, budget_event = await _budget(store, session_id)
        active = (await store.stats(session_id)).active_tokens
        return Restored(done, active, budget, budget_event, pinned)

    result = with_store(url, tenant, action)
    if as_json:
        emit_json(result.event)
        return
    if result.event is None:
        echo("Nothing to restore: those groups are already in the context.")
    else:
        echo(f"event {result.event.id}: {event_outcome(result.event)}")
        if result.pinned:
            echo(
                f"{quantity(len(result.pinned), 'group')} pinned: no strategy excludes "
                f"{'it' if len(result.pinned) == 1 else 'them'} until "
                f"`chatledger unpin {session_id} GROUP...` (or restore with --no-pin)."
            )
        elif result.event.restored:
            echo(
                f"{quantity(len(result.event.restored), 'group')} left unpinned: strategies "
                "may exclude them again."
            )
    _against_budget(result)


def _against_budget(result: Restored) -> None:
    line = f"active tokens now {number(result.active_tokens)}"
    if result.budget is None:
        echo(line + " (no compaction with a token budget recorded)")
        return
    assert result.budget_event is not None
    line += (
        f"; the budget of the last compaction ({short_strategy(result.budget_event.strategy)}, "
        f"event {result.budget_event.id}) is {number(result.budget)}"
    )
    echo(line)
    if result.active_tokens > result.budget:
        echo(
            "warning: the context is over that budget for good while these groups are pinned",
            style="bold yellow",
            err=True,
        )


def _pin_command(pinned: bool) -> click.Command:
    verb = "pin" if pinned else "unpin"

    @click.command(name=verb)
    @click.argument("session_id", metavar="SESSION")
    @click.argument("groups", metavar="GROUP...", nargs=-1, required=True)
    @url_option
    @tenant_option
    @json_option
    def command(
        session_id: str, groups: tuple[str, ...], url: str | None, tenant: str, as_json: bool
    ) -> None:
        async def action(store: HistoryBackend) -> list[str]:
            from store.cli._ids import group_ids

            await store.session(session_id)  # SessionNotFound for an unknown id
            chosen = await group_ids(store, session_id, groups)
            if pinned:
                return await store.pin(session_id, chosen)
            return await store.unpin(session_id, chosen)

        changed = with_store(url, tenant, action)
        if as_json:
            emit_json({"changed": changed})
            return
        state = "pinned" if pinned else "unpinned"
        for group_id in changed:
            echo(f"{state} {group_id}")
        if len(changed) < len(set(groups)):
            echo(f"{len(set(groups)) - len(changed)} already {state}")

    command.help = (
        "Pin groups: no strategy excludes them."
        if pinned
        else "Unpin groups: strategies may exclude them again."
    )
    return command


pin = _pin_command(True)
unpin = _pin_command(False)


@click.command()
@click.argument("session_id", metavar="SESSION")
@yes_option
@url_option
@tenant_option
@json_option
def delete(session_id: str, yes: bool, url: str | None, tenant: str, as_json: bool) -> None:
    """Delete a session and all it holds (asks first)."""

    async def info(store: HistoryBackend) -> tuple[SessionInfo, list[str]]:
        forks = [b.session_id for b in await store.branches(session_id) if b.relation == "fork"]
        return await store.session(session_id), forks

    found, forks = with_store(url, tenant, info)
    keeps = (
        f"; its {quantity(len(forks), 'fork')} {'keeps' if len(forks) == 1 else 'keep'} "
        "the messages shared with it"
        if forks
        else ""
    )
    confirm(
        f"Delete session {session_id} ({quantity(found.stored_messages, 'message')}, "
        f"tenant {tenant}) for good{keeps}?",
        yes=yes,
    )

    async def action(store: HistoryBackend) -> None:
        await store.delete_session(session_id)

    with_store(url, tenant, action)
    if as_json:
        emit_json({"deleted": session_id, "messages": found.stored_messages, "forks": forks})
    else:
        echo(f"deleted session {session_id} ({quantity(found.stored_messages, 'message')}){keeps}")


@click.command()
@click.argument("session_id", metavar="SESSION")
@click.option(
    "--tokenizer",
    required=True,
    metavar="NAME",
    help="o200k_base, cl100k_base, character_estimator, or a model name (gpt-4o).",
)
@url_option
@tenant_option
@json_option
def recount(session_id: str, tokenizer: str, url: str | None, tenant: str, as_json: bool) -> None:
    """Recount a session's tokens with another tokenizer."""
    chosen = tokenizer_option_value(tokenizer)

    async def action(store: HistoryBackend) -> tuple[SessionInfo, SessionInfo]:
        before = await store.session(session_id)
        return before, await store.recount(session_id)

    before, after = with_store(url, tenant, action, tokenizer=chosen)
    if as_json:
        emit_json(after)
    else:
        echo(
            f"recounted {session_id} with {after.tokenizer} (was {before.tokenizer}): "
            f"{number(before.stored_tokens)} → {number(after.stored_tokens)} tokens"
        )


@click.command()
@click.argument("session_id", metavar="SESSION")
@click.argument("title", required=False)
@click.option("--clear", is_flag=True, help="Remove the session's title.")
@url_option
@tenant_option
@json_option
def title(
    session_id: str, title: str | None, clear: bool, url: str | None, tenant: str, as_json: bool
) -> None:
    """Show a session's title, set it, or remove it."""
    if clear and title is not None:
        raise click.UsageError("give a TITLE or --clear, not both")

    async def action(store: HistoryBackend) -> SessionInfo:
        found = await store.session(session_id)  # SessionNotFound: a typo creates nothing
        if title is None and not clear:
            return found
        await store.set_title(session_id, title)
        return await store.session(session_id)

    after = with_store(url, tenant, action)
    if as_json:
        emit_json(after)
    elif title is None and not clear:
        echo(after.title if after.title is not None else f"Session {session_id} has no title.")
    elif clear:
        echo(f"removed the title of {session_id}")
    else:
        echo(f"titled {session_id}: {after.title}")
