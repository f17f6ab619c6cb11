"""The README's command list and ``docs/cli.md`` follow the click command tree.

A new command needs a row in the README's "Command line" table (its ``--help`` summary
and one example that parses) and a ``### chatledger COMMAND`` section in ``docs/cli.md``
naming each of its options; these tests say which is missing.
"""

from __future__ import annotations

import re
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from store.admin import TenantInfo
from store.cli import cli
from store.demo import TurnRecord
from store.importing import ImportReport
from store.models import (
    BranchInfo,
    CompactionEvent,
    ExcludedGroup,
    PurgeReport,
    RedactReport,
    SessionInfo,
    Stats,
    StoredMessage,
    WhyResult,
)
from store.sql.upkeep.doctor import DoctorReport
from store.sql.upkeep.encryption import KeyEvent
from store.usage import UsageReport, UsageRow
from strategies.messages import Message
from tests.cli.helpers import chatledger

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs" / "cli.md"
ROW = re.compile(r"^\| `(?P<command>[^`]+)` \| (?P<help>.+?) \| `(?P<example>[^`]+)` \|$")
SHAPES = [
    SessionInfo,
    BranchInfo,
    TenantInfo,
    StoredMessage,
    Message,
    CompactionEvent,
    ExcludedGroup,
    WhyResult,
    Stats,
    UsageReport,
    UsageRow,
    TurnRecord,
    ImportReport,
    PurgeReport,
    RedactReport,
    DoctorReport,
    KeyEvent,
]


def _commands(group: click.Group = cli, prefix: str = "") -> Iterator[tuple[str, click.Command]]:
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        if command.hidden:
            continue
        if isinstance(command, click.Group):
            yield from _commands(command, f"{prefix}{name} ")
        else:
            yield f"{prefix}{name}", command


COMMANDS = dict(_commands())


def _section(text: str, heading: str) -> str:
    start = text.index(heading + "\n")
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end != -1 else len(text)]


def _readme_rows() -> dict[str, tuple[str, str]]:
    found: dict[str, tuple[str, str]] = {}
    for line in _section(README.read_text(), "## Command line").splitlines():
        match = ROW.match(line)
        if match:
            assert match["command"] not in found, f"{match['command']} is listed twice"
            found[match["command"]] = (match["help"], match["example"])
    return found


def test_the_readme_lists_every_command_and_only_those() -> None:
    listed = _readme_rows()
    assert sorted(listed) == sorted(COMMANDS), (
        f"missing from the README: {sorted(set(COMMANDS) - set(listed))}; "
        f"not commands: {sorted(set(listed) - set(COMMANDS))}"
    )


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_each_readme_row_is_the_help_summary_with_an_example_that_parses(path: str) -> None:
    described, example = _readme_rows()[path]
    command = COMMANDS[path]
    assert described == command.get_short_help_str(limit=1000), path
    words = shlex.split(example)
    assert words[: 1 + len(path.split())] == ["chatledger", *path.split()], example
    args = words[1 + len(path.split()) :]
    command.make_context(path, args)  # a usage error if an option or argument is wrong


def _doc_sections() -> dict[str, str]:
    text = DOCS.read_text()
    sections: dict[str, str] = {}
    for match in re.finditer(r"^### (.+)$", text, flags=re.MULTILINE):
        end = text.find("\n#", match.end())
        body = text[match.end() : end if end != -1 else len(text)]
        for name in match[1].split(" / "):
            assert name.startswith("chatledger "), match[1]
            sections[name.removeprefix("chatledger ")] = body
    return sections


def test_docs_cli_has_a_section_for_every_command_naming_its_options() -> None:
    sections = _doc_sections()
    assert sorted(sections) == sorted(COMMANDS)
    for path, command in COMMANDS.items():
        body = sections[path]
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                assert max(param.opts, key=len) in body, (path, param.opts)
            elif isinstance(param, click.Argument):
                assert param.human_readable_name.strip("[].") in body, (path, param.name)
        if any("--json" in p.opts for p in command.params if isinstance(p, click.Option)):
            assert "JSON" in body, f"{path}: its --json shape is not documented"


@pytest.mark.parametrize("model", SHAPES, ids=lambda m: m.__name__)
def test_docs_cli_names_every_field_of_each_json_shape(model: type) -> None:
    body = _doc_sections_of_shapes()[model.__name__]
    missing = [f for f in model.model_fields if f"`{f}`" not in body]  # type: ignore[attr-defined]
    assert not missing, f"{model.__name__}: {missing}"


def _doc_sections_of_shapes() -> dict[str, str]:
    text = _section(DOCS.read_text(), "## JSON shapes")
    parts = re.split(r"^#### (\w+)$", text, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


DEMO_SESSION = "demo-73199aef1c9e"
"""The session ``chatledger demo`` makes first in a database (its default seed)."""


@pytest.fixture(scope="module")
def demo_database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database where ``chatledger demo`` (default seed) played three turns."""
    path = tmp_path_factory.mktemp("readme") / "demo.db"
    done = chatledger("demo", "--turns", "3", "--url", str(path))
    assert done.returncode == 0, done.stderr
    assert chatledger("sessions", "--url", str(path), "--json").json()[0]["session_id"] == (
        DEMO_SESSION
    )
    return path


def _demo_examples() -> list[str]:
    return [example for _, example in _readme_rows().values() if DEMO_SESSION in example]


@pytest.mark.parametrize("example", _demo_examples())
def test_the_readme_examples_run_on_the_demos_ids(
    example: str, demo_database: Path, tmp_path: Path
) -> None:
    """Each example that names the demo's session runs as written (on a copy of a new
    demo database): the session, message and group ids it names exist."""
    copy = tmp_path / "chatledger.db"
    shutil.copyfile(demo_database, copy)
    done = chatledger(*shlex.split(example)[1:], cwd=tmp_path)
    assert done.returncode == 0, (example, done.stderr)


def test_the_readme_names_the_demos_ids() -> None:
    assert len(_demo_examples()) >= 15
