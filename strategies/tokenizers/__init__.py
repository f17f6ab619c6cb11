"""Tokenizers, and the rule for counting the tokens of a stored message.

A :class:`Tokenizer` has a ``name`` (recorded per session, so that counts made with
different tokenizers are never mixed) and ``count_tokens(text)``. Three ship here:

* :class:`TiktokenTokenizer`, the default (``o200k_base``; ``cl100k_base`` and model
  names that map to either are accepted). The BPE vocabularies ship inside the package
  (``strategies/tokenizers/vocab/``, see its ``NOTICE``); they are read with
  :mod:`importlib.resources`, their SHA-256 is checked against the hashes tiktoken
  itself pins, and nothing is ever downloaded. Special-token text such as
  ``<|endoftext|>`` is counted as plain text and never raises.
* :class:`CharacterEstimatorTokenizer`, ``max(1, len(text) // 4)``, the same estimate
  as Agent Framework's. Fast, dependency-free, good for tests.
* :class:`CountingTokenizer`, a wrapper that counts the calls made to another one.

What a message counts (:func:`count_message_tokens`, under a :class:`TokenCountPolicy`)
is written down in :mod:`~strategies.tokenizers.counting`. The modules:

* :mod:`~strategies.tokenizers.base`: the :class:`Tokenizer` and :class:`BatchTokenizer`
  contract, and the two tokenizers that read no vocabulary;
* :mod:`~strategies.tokenizers.counting`: the counting rule and its policy;
* :mod:`~strategies.tokenizers.tiktoken_tokenizer`: :class:`TiktokenTokenizer`;
* :mod:`~strategies.tokenizers.bpe`: the offline encodings, built from ``vocab/``.
"""

from strategies.tokenizers.base import (
    BatchTokenizer,
    CharacterEstimatorTokenizer,
    CountingTokenizer,
    Tokenizer,
    count_texts,
)
from strategies.tokenizers.bpe import (
    EXPECTED_SHA256,
    SUPPORTED_ENCODINGS,
    UnknownTokenizer,
    VocabularyIntegrityError,
    encoding_name_for,
    load_encoding,
)
from strategies.tokenizers.counting import (
    DEFAULT_POLICY,
    TokenCountPolicy,
    compact_json,
    count_content_tokens,
    count_message_tokens,
    count_messages_tokens,
    count_text_tokens,
    message_texts,
)
from strategies.tokenizers.tiktoken_tokenizer import TiktokenTokenizer, tokenizer_named

__all__ = [
    "DEFAULT_POLICY",
    "EXPECTED_SHA256",
    "SUPPORTED_ENCODINGS",
    "BatchTokenizer",
    "CharacterEstimatorTokenizer",
    "CountingTokenizer",
    "TiktokenTokenizer",
    "TokenCountPolicy",
    "Tokenizer",
    "UnknownTokenizer",
    "VocabularyIntegrityError",
    "compact_json",
    "count_content_tokens",
    "count_message_tokens",
    "count_messages_tokens",
    "count_text_tokens",
    "count_texts",
    "encoding_name_for",
    "load_encoding",
    "message_texts",
    "tokenizer_named",
]
