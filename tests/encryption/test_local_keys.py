"""The local key file and its provider: the file round-trips, wrapped keys open only
under the key id they were stored with, and every file that cannot be trusted is
refused in one line."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from store.encryption.local import KEY_FILE_FORMAT, LocalKeyProvider, new_key_file
from store.encryption.provider import KeyProvider
from store.errors import EncryptionError, InvalidInput, InvalidKey, WrongKey

POSIX = pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")
DATA_KEY = bytes(range(32))


def _document(path: Path) -> dict[str, object]:
    loaded: dict[str, object] = json.loads(path.read_text())
    return loaded


def _write(path: Path, document: object) -> Path:
    path.write_text(json.dumps(document))
    path.chmod(0o600)
    return path


def _valid(key_id: str = "k1", key: bytes = b"\x01" * 32) -> dict[str, object]:
    return {
        "format": KEY_FILE_FORMAT,
        "version": 1,
        "current": key_id,
        "keys": {key_id: base64.b64encode(key).decode()},
    }


def test_a_new_key_file_holds_one_current_key_of_32_bytes(tmp_path: Path) -> None:
    path = tmp_path / "chatledger.key"
    key_id = new_key_file(path)
    document = _document(path)
    assert document["format"] == "chatledger-key-file" and document["version"] == 1
    assert document["current"] == key_id
    keys = document["keys"]
    assert isinstance(keys, dict) and list(keys) == [key_id]
    assert len(base64.b64decode(keys[key_id])) == 32
    assert LocalKeyProvider.from_file(path).key_id == key_id
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind


@POSIX
def test_a_new_key_file_is_private(tmp_path: Path) -> None:
    path = tmp_path / "chatledger.key"
    new_key_file(path)
    assert path.stat().st_mode & 0o777 == 0o600
    new_key_file(path, add=True)
    assert path.stat().st_mode & 0o777 == 0o600


def test_two_new_key_files_hold_different_keys(tmp_path: Path) -> None:
    first, second = new_key_file(tmp_path / "a"), new_key_file(tmp_path / "b")
    assert first != second
    a, b = _document(tmp_path / "a")["keys"], _document(tmp_path / "b")["keys"]
    assert isinstance(a, dict) and isinstance(b, dict)
    assert a[first] != b[second]


def test_the_provider_is_a_key_provider(tmp_path: Path) -> None:
    new_key_file(tmp_path / "k")
    assert isinstance(LocalKeyProvider.from_file(tmp_path / "k"), KeyProvider)


async def test_wrap_then_unwrap_gives_the_data_key_back(tmp_path: Path) -> None:
    key_id = new_key_file(tmp_path / "k")
    provider = LocalKeyProvider.from_file(tmp_path / "k")
    wrapped = await provider.wrap(DATA_KEY)
    assert DATA_KEY not in wrapped
    assert await provider.unwrap(wrapped, key_id) == DATA_KEY
    again = await provider.wrap(DATA_KEY)
    assert again != wrapped  # a fresh nonce each time
    reread = LocalKeyProvider.from_file(tmp_path / "k")
    assert await reread.unwrap(wrapped, key_id) == DATA_KEY


async def test_an_unknown_key_id_is_a_wrong_key_naming_it(tmp_path: Path) -> None:
    key_id = new_key_file(tmp_path / "k")
    provider = LocalKeyProvider.from_file(tmp_path / "k")
    wrapped = await provider.wrap(DATA_KEY)
    with pytest.raises(WrongKey, match="'lk-elsewhere'") as raised:
        await provider.unwrap(wrapped, "lk-elsewhere")
    assert key_id in str(raised.value)  # and says which keys it holds


async def test_a_key_under_another_id_does_not_open_even_with_the_same_bytes() -> None:
    """The wrapped key is bound to its KEK id: the same key bytes stored under another
    id do not open it."""
    key = b"\x07" * 32
    provider = LocalKeyProvider({"a": key, "b": key}, current="a")
    wrapped = await provider.wrap(DATA_KEY)
    with pytest.raises(WrongKey, match="'b'"):
        await provider.unwrap(wrapped, "b")


async def test_another_key_file_with_the_same_id_is_a_wrong_key() -> None:
    ours = LocalKeyProvider({"k": b"\x01" * 32}, current="k")
    theirs = LocalKeyProvider({"k": b"\x02" * 32}, current="k")
    with pytest.raises(WrongKey, match="'k'"):
        await theirs.unwrap(await ours.wrap(DATA_KEY), "k")


@pytest.mark.parametrize("where", [0, 1, 13, -1])
async def test_a_tampered_wrapped_key_is_a_wrong_key(where: int) -> None:
    provider = LocalKeyProvider({"k": b"\x01" * 32}, current="k")
    wrapped = bytearray(await provider.wrap(DATA_KEY))
    wrapped[where] ^= 0x01
    with pytest.raises(WrongKey, match="'k'"):
        await provider.unwrap(bytes(wrapped), "k")


async def test_a_truncated_wrapped_key_is_a_wrong_key() -> None:
    provider = LocalKeyProvider({"k": b"\x01" * 32}, current="k")
    wrapped = await provider.wrap(DATA_KEY)
    with pytest.raises(WrongKey, match="'k'"):
        await provider.unwrap(wrapped[:20], "k")


async def test_adding_a_key_makes_it_current_and_keeps_the_old_ones(tmp_path: Path) -> None:
    path = tmp_path / "k"
    old = new_key_file(path)
    wrapped_under_old = await LocalKeyProvider.from_file(path).wrap(DATA_KEY)
    new = new_key_file(path, add=True)
    assert new != old
    provider = LocalKeyProvider.from_file(path)
    assert provider.key_id == new and set(provider.key_ids) == {old, new}
    assert await provider.unwrap(wrapped_under_old, old) == DATA_KEY
    assert await provider.unwrap(await provider.wrap(DATA_KEY), new) == DATA_KEY


def test_a_new_key_file_refuses_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "k"
    new_key_file(path)
    before = path.read_text()
    with pytest.raises(InvalidInput, match="exists already"):
        new_key_file(path)
    assert path.read_text() == before
    other = tmp_path / "notes.txt"
    other.write_text("mine")
    with pytest.raises(InvalidInput, match="exists already"):
        new_key_file(other)
    assert other.read_text() == "mine"


def test_adding_to_a_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="no key file to add a key to"):
        new_key_file(tmp_path / "missing", add=True)
    assert not (tmp_path / "missing").exists()


def test_adding_to_a_bad_file_is_refused_and_leaves_it(tmp_path: Path) -> None:
    path = _write(tmp_path / "k", {"format": "something else"})
    before = path.read_text()
    with pytest.raises(InvalidKey, match="not a key file"):
        new_key_file(path, add=True)
    assert path.read_text() == before


BAD_FILES: dict[str, tuple[object, str]] = {
    "not JSON": ("{nope", "invalid JSON"),
    "a list": ([1, 2], "not a key file"),
    "another format": ({**_valid(), "format": "pem"}, "not a key file"),
    "a later version": ({**_valid(), "version": 2}, "version 2"),
    "no keys": ({**_valid(), "keys": {}}, '"keys"'),
    "keys not a map": ({**_valid(), "keys": ["x"]}, '"keys"'),
    "current unknown": ({**_valid(), "current": "zz"}, '"current"'),
    "current missing": ({k: v for k, v in _valid().items() if k != "current"}, '"current"'),
    "not base64": ({**_valid(), "keys": {"k1": "***"}}, "not valid base64"),
    "not a string": ({**_valid(), "keys": {"k1": 12}}, "not a base64 string"),
    "a short key": (_valid(key=b"\x01" * 16), "16 bytes, not 32"),
    "a long key": (_valid(key=b"\x01" * 64), "64 bytes, not 32"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_a_bad_key_file_is_refused_in_one_line(case: str, tmp_path: Path) -> None:
    document, expected = BAD_FILES[case]
    path = tmp_path / "k"
    if isinstance(document, str):
        path.write_text(document)
        path.chmod(0o600)
    else:
        _write(path, document)
    with pytest.raises(InvalidKey) as raised:
        LocalKeyProvider.from_file(path)
    message = str(raised.value)
    assert expected in message and "\n" not in message and str(path) in message
    assert isinstance(raised.value, EncryptionError) and isinstance(raised.value, ValueError)


def test_a_missing_key_file_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(InvalidKey, match=r"^cannot read key file .*missing") as raised:
        LocalKeyProvider.from_file(tmp_path / "missing")
    assert "\n" not in str(raised.value)


def test_a_key_file_that_is_not_text_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "k"
    path.write_bytes(b"\xff\xfe\x00")
    path.chmod(0o600)
    with pytest.raises(InvalidKey, match="not UTF-8"):
        LocalKeyProvider.from_file(path)


@POSIX
@pytest.mark.parametrize("mode", [0o640, 0o604, 0o620, 0o602, 0o644, 0o660, 0o666])
def test_a_key_file_open_to_others_is_refused_as_ssh_does(mode: int, tmp_path: Path) -> None:
    path = tmp_path / "k"
    new_key_file(path)
    path.chmod(mode)
    with pytest.raises(InvalidKey) as raised:
        LocalKeyProvider.from_file(path)
    message = str(raised.value)
    assert f"mode {mode:04o}" in message and "ssh" in message and "chmod 600" in message
    assert "\n" not in message
    path.chmod(0o400)  # the owner alone, read-only: accepted
    assert LocalKeyProvider.from_file(path).key_id


def test_from_env_reads_the_key_files_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key_id = new_key_file(tmp_path / "k")
    monkeypatch.setenv("CHATLEDGER_TEST_KEY", (tmp_path / "k").read_text())
    provider = LocalKeyProvider.from_env("CHATLEDGER_TEST_KEY")
    assert provider.key_id == key_id


@pytest.mark.parametrize("value", [None, "", "  \n"])
def test_from_env_refuses_an_unset_variable(
    value: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    if value is None:
        monkeypatch.delenv("CHATLEDGER_TEST_KEY", raising=False)
    else:
        monkeypatch.setenv("CHATLEDGER_TEST_KEY", value)
    with pytest.raises(InvalidKey, match=r"\$CHATLEDGER_TEST_KEY is not set"):
        LocalKeyProvider.from_env("CHATLEDGER_TEST_KEY")


def test_from_env_refuses_a_bad_document_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CHATLEDGER_TEST_KEY", json.dumps(_valid(key=b"\x01" * 31)))
    with pytest.raises(InvalidKey, match=r"^\$CHATLEDGER_TEST_KEY: key 'k1' is 31 bytes"):
        LocalKeyProvider.from_env("CHATLEDGER_TEST_KEY")


def test_the_plain_constructor_checks_its_keys() -> None:
    with pytest.raises(InvalidKey, match="31 bytes, not 32"):
        LocalKeyProvider({"k": b"\x01" * 31}, current="k")
    with pytest.raises(InvalidKey, match="current key 'j'"):
        LocalKeyProvider({"k": b"\x01" * 32}, current="j")
    with pytest.raises(InvalidKey, match="non-empty"):
        LocalKeyProvider({"": b"\x01" * 32}, current="")


def test_without_cryptography_the_import_names_the_extra() -> None:
    code = (
        "import sys\n"
        "sys.modules['cryptography'] = None\n"
        "try:\n"
        "    import store.encryption.local\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines() == [
        "store.encryption.local needs the cryptography package: "
        "pip install 'chatledger[encryption]'"
    ]
