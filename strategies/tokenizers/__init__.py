"""Tokenizers, and the rule for counting the tokens of a stored message.

* :mod:`~strategies.tokenizers.counting`: the :class:`Tokenizer` contract, the
  character estimator, the call-counting wrapper, and how a message is counted.
* :mod:`~strategies.tokenizers.tiktoken_tokenizer`: :class:`TiktokenTokenizer`.
* :mod:`~strategies.tokenizers.bpe`: the offline loader of the BPE encodings, from the
  vocabularies shipped in ``vocab/`` (see its ``NOTICE``).
"""

from strategies.tokenizers.bpe import (
    EXPECTED_SHA256,
    SUPPORTED_ENCODINGS,
    VocabularyIntegrityError,
    encoding_name_for,
    load_encoding,
)
from strategies.tokenizers.counting import (
    DEFAULT_POLICY,
    BatchTokenizer,
    CharacterEstimatorTokenizer,
    CountingTokenizer,
    TokenCountPolicy,
    Tokenizer,
    compact_json,
    count_content_tokens,
    count_message_tokens,
    count_messages_tokens,
    count_text_tokens,
    count_texts,
    message_texts,
)
from strategies.tokenizers.tiktoken_tokenizer import TiktokenTokenizer

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
]
