"""The README's library example runs as written (the front door must stay true)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def test_readme_has_a_library_example() -> None:
    assert any("HistoryStore.open" in block for block in _python_blocks())


async def test_readme_library_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    block = next(b for b in _python_blocks() if "HistoryStore.open" in b)
    imports = "\n".join(line for line in block.splitlines() if line.startswith(("from", "import")))
    body = "\n".join(line for line in block.splitlines() if not line.startswith(("from", "import")))
    source = imports + "\n\nasync def _example():\n" + textwrap.indent(body, "    ")
    namespace: dict[str, object] = {}
    exec(compile(source, str(README), "exec"), namespace)
    await namespace["_example"]()  # type: ignore[operator]
    assert (tmp_path / "chat.db").exists()
    printed = capsys.readouterr().out
    assert "stored_messages=1" in printed
