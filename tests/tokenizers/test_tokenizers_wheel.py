"""The built wheel ships the vocabularies and the migrations, and counts tokens offline."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# Run inside the fresh venv, from an empty folder, with every way out to the network
# refused: the package must count with the vocabulary it ships.
OFFLINE_SCRIPT = textwrap.dedent(
    """
    import socket, sys

    def refuse(*args, **kwargs):
        raise OSError("network disabled for this test")

    socket.socket.connect = refuse
    socket.create_connection = refuse
    socket.getaddrinfo = refuse

    import strategies
    from strategies.tokenizers import TiktokenTokenizer

    tokenizer = TiktokenTokenizer("gpt-4o")
    print(strategies.__file__)
    print(tokenizer.name, tokenizer.count_tokens(sys.argv[1]))
    """
)


def _run(args: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=240, check=False
    )
    assert done.returncode == 0, f"{args!r} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _build_wheel(out: Path) -> Path:
    _run([sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(REPO)], cwd=REPO)
    (wheel,) = out.glob("chatledger-*.whl")
    return wheel


@pytest.mark.slow
def test_wheel_installs_alone_and_counts_offline(tmp_path: Path) -> None:
    wheel = _build_wheel(tmp_path / "dist")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    for vocab in ("o200k_base.tiktoken.gz", "cl100k_base.tiktoken.gz", "NOTICE"):
        assert f"strategies/tokenizers/vocab/{vocab}" in names
    if (REPO / "migrations" / "env.py").exists():
        assert "store/_migrations/env.py" in names

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp_path)
    python = venv / "bin" / "python"
    # The project's pip installs into the fresh venv; dependencies come from the registry.
    _run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", str(wheel)],
        cwd=tmp_path,
    )

    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["TIKTOKEN_CACHE_DIR"] = str(tmp_path / "tiktoken-cache")
    text = "Hello, 世界\uff01こんにちは、元気ですか\uff1f"
    output = _run([str(python), "-I", "-c", OFFLINE_SCRIPT, text], cwd=workdir, env=env)
    module_path, counted = output.strip().splitlines()
    assert Path(module_path).is_relative_to(venv)
    # 11 is this text's o200k_base count, pinned in test_tokenizers_tiktoken.py.
    assert counted == "o200k_base 11"
    assert not (tmp_path / "tiktoken-cache").exists()
