"""Offline OpenAI BPE encodings for tiktoken, from the vocabularies shipped in ``vocab/``.

The split patterns and special tokens are those of ``tiktoken_ext.openai_public``; the
mergeable ranks are read from the package with :mod:`importlib.resources`, checked
against the SHA-256 digests tiktoken pins, and parsed here (one ``base64-token rank``
pair a line). Nothing here reads tiktoken's download cache or opens a connection.
Public names are exported by :mod:`strategies.tokenizers`.
"""

from __future__ import annotations

import base64
import binascii
import functools
import gzip
import hashlib
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Final

from strategies.errors import ChatledgerError

if TYPE_CHECKING:
    import tiktoken

__all__ = [
    "EXPECTED_SHA256",
    "SUPPORTED_ENCODINGS",
    "UnknownTokenizer",
    "VocabularyIntegrityError",
    "cached_encoding",
    "encoding_name_for",
    "load_encoding",
]

_ENDOFTEXT = "<|endoftext|>"
_FIM_PREFIX = "<|fim_prefix|>"
_FIM_MIDDLE = "<|fim_middle|>"
_FIM_SUFFIX = "<|fim_suffix|>"
_ENDOFPROMPT = "<|endofprompt|>"

_CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"""
        r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"""
        r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)


@dataclass(frozen=True, slots=True)
class _EncodingSpec:
    pattern: str
    special_tokens: dict[str, int]


_ENCODING_SPECS: Final[dict[str, _EncodingSpec]] = {
    "o200k_base": _EncodingSpec(_O200K_PATTERN, {_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018}),
    "cl100k_base": _EncodingSpec(
        _CL100K_PATTERN,
        {
            _ENDOFTEXT: 100257,
            _FIM_PREFIX: 100258,
            _FIM_MIDDLE: 100259,
            _FIM_SUFFIX: 100260,
            _ENDOFPROMPT: 100276,
        },
    ),
}

SUPPORTED_ENCODINGS: Final[tuple[str, ...]] = tuple(_ENCODING_SPECS)
"""Encodings whose vocabularies ship with the package."""

EXPECTED_SHA256: Final[dict[str, str]] = {
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}
"""SHA-256 of each decompressed vocabulary, the same hashes tiktoken checks."""

_VOCAB_PACKAGE = "strategies.tokenizers"
_VOCAB_DIR = "vocab"


class VocabularyIntegrityError(ChatledgerError, RuntimeError):
    """A shipped vocabulary file is missing, corrupt, or does not match its hash."""


class UnknownTokenizer(ChatledgerError, ValueError):
    """A tokenizer, encoding or model name that no shipped tokenizer answers to; the
    message lists the names accepted."""


def encoding_name_for(encoding_or_model: str, /) -> str:
    """Map an encoding name or an OpenAI model name to a supported encoding name.

    Raises:
        UnknownTokenizer: the name is neither a supported encoding nor a model that uses one.
    """
    if encoding_or_model in _ENCODING_SPECS:
        return encoding_or_model
    # tiktoken is imported once a tokenizer is built, never by importing chatledger
    from tiktoken.model import MODEL_PREFIX_TO_ENCODING, MODEL_TO_ENCODING

    encoding = MODEL_TO_ENCODING.get(encoding_or_model)
    if encoding is None:
        encoding = next(
            (
                enc
                for prefix, enc in MODEL_PREFIX_TO_ENCODING.items()
                if encoding_or_model.startswith(prefix)
            ),
            None,
        )
    if encoding in _ENCODING_SPECS:
        return encoding
    accepted = ", ".join(SUPPORTED_ENCODINGS)
    detail = f" (it uses {encoding}, which is not shipped)" if encoding else ""
    raise UnknownTokenizer(
        f"unknown tokenizer {encoding_or_model!r}{detail}: expected one of {accepted}, "
        "or an OpenAI model name that uses one of them (such as gpt-4o or gpt-4)"
    )


def _read_vocabulary(encoding_name: str) -> bytes:
    resource = resources.files(_VOCAB_PACKAGE) / _VOCAB_DIR / f"{encoding_name}.tiktoken.gz"
    try:
        data = gzip.decompress(resource.read_bytes())
    except (OSError, EOFError) as exc:
        raise VocabularyIntegrityError(
            f"cannot read the {encoding_name} vocabulary shipped with chatledger "
            f"({resource}): {exc}; reinstall the package"
        ) from exc
    actual = hashlib.sha256(data).hexdigest()
    expected = EXPECTED_SHA256[encoding_name]
    if actual != expected:
        raise VocabularyIntegrityError(
            f"the {encoding_name} vocabulary shipped with chatledger ({resource}) has "
            f"SHA-256 {actual}, expected {expected}; the file is corrupt, reinstall the package"
        )
    return data


def _parse_ranks(encoding_name: str, data: bytes) -> dict[bytes, int]:
    ranks: dict[bytes, int] = {}
    for number, line in enumerate(data.splitlines(), start=1):
        if not line:
            continue
        try:
            token, rank = line.split()
            ranks[base64.b64decode(token, validate=True)] = int(rank)
        except (ValueError, binascii.Error) as exc:
            raise VocabularyIntegrityError(
                f"line {number} of the {encoding_name} vocabulary is malformed: {line[:80]!r}"
            ) from exc
    return ranks


def load_encoding(encoding_name: str, /) -> tiktoken.Encoding:
    """Build a tiktoken encoding from the shipped vocabulary, without any cache or network.

    Prefer :class:`TiktokenTokenizer`, which caches the result per process.

    Raises:
        UnknownTokenizer: ``encoding_name`` is not one of :data:`SUPPORTED_ENCODINGS`.
        VocabularyIntegrityError: the shipped file is unreadable or fails its hash check.
    """
    spec = _ENCODING_SPECS.get(encoding_name)
    if spec is None:
        raise UnknownTokenizer(
            f"unknown encoding {encoding_name!r}: expected one of {', '.join(SUPPORTED_ENCODINGS)}"
        )
    import tiktoken

    ranks = _parse_ranks(encoding_name, _read_vocabulary(encoding_name))
    return tiktoken.Encoding(
        encoding_name,
        pat_str=spec.pattern,
        mergeable_ranks=ranks,
        special_tokens=dict(spec.special_tokens),
    )


cached_encoding = functools.cache(load_encoding)
"""Like :func:`load_encoding`, built once per process and name."""
