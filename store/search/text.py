"""The normalized text of search: one rule for the index and for the query, every backend.

:func:`normalize` folds a text and cuts it into tokens, joined by single spaces:

* **Folding.** The text is cut into clusters (a character with the combining marks,
  Hangul vowel and final jamo, and half-width kana voicing marks that follow it); each
  cluster is decomposed (NFKD), casefolded, decomposed again, stripped of its combining
  marks, then recomposed (NFC). Kana voicing marks (゛ ゜) are the one exception kept
  through the recomposition, so that が stays apart from か, and Hangul jamo recompose
  into syllables. So "Météo" and "METEO" fold to "meteo", "ﬁ" to "fi", "ｶﾞ" to "ガ".
* **Token characters** are the lowercase and other letters, decimal digits and letter
  numbers (Unicode categories Ll, Lm, Lo, Nd, Nl) that were letters or numbers in
  Unicode 3.2 already: every other character separates tokens (capitals that
  casefolding leaves, Cherokee, and other numbers such as fractions, included).
  SQLite's ``unicode61`` tokenizer knows Unicode 6.1 and PostgreSQL's parser its C
  library's tables; characters both know for certain are the only ones kept, so that
  both split the normalized text exactly at its spaces.
* **Words** are the runs of token characters outside CJK runs. A word that starts with
  what PostgreSQL reads as a number in scientific notation (``12e3`` in ``12e3x``) is
  cut after it, as PostgreSQL would. A word longer than :data:`MAX_TOKEN_CHARS` keeps
  its first :data:`MAX_TOKEN_CHARS` characters (PostgreSQL ignores long lexemes).
* **CJK runs** are the runs of Han, Kana (hiragana, katakana) and Hangul characters.
  A run becomes its single characters then its overlapping pairs, in order:
  "東京都" is ``東 京 都 東京 京都``. So a run's pairs are consecutive tokens, and a
  chain of pairs matches exactly the substrings of one run.

:func:`normalize` is idempotent on words; a CJK pair is a run of its own, so normalizing
normalized CJK text expands its pairs again (index and query both normalize the
original text once).

What the model sees of a stored message (:func:`message_text`) follows the token
counting rule of :func:`strategies.tokenizers.message_texts`; :func:`indexable_text`
normalizes it, keeping at most :data:`MAX_INDEXED_TOKENS` tokens and
:data:`MAX_INDEXED_BYTES` bytes (PostgreSQL's limits of positions and tsvector size).
One limit remains PostgreSQL's own: a tsvector keeps the first 256 positions of a
token, so a phrase that needs a later occurrence of a token repeated more than 256 times
in one message is found by FTS5 and not by PostgreSQL.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from itertools import groupby
from typing import Final

from store.rules.identity import is_tombstone
from strategies.messages import Message
from strategies.tokenizers.counting import message_texts

__all__ = [
    "MAX_INDEXED_BYTES",
    "MAX_INDEXED_CHARS",
    "MAX_INDEXED_TOKENS",
    "MAX_TOKEN_CHARS",
    "Word",
    "cjk_tokens",
    "fold",
    "indexable_text",
    "is_cjk",
    "message_text",
    "normalize",
    "scan",
    "search_text_of",
    "tokens",
]

MAX_TOKEN_CHARS: Final = 128
"""The longest token: a longer word keeps its first characters (at most 512 bytes)."""
MAX_INDEXED_TOKENS: Final = 16383
"""The most tokens indexed of one message: PostgreSQL's last position in a tsvector."""
MAX_INDEXED_BYTES: Final = 512 * 1024
"""The most bytes (UTF-8) indexed of one message, under PostgreSQL's 1 MB tsvector."""
MAX_INDEXED_CHARS: Final = 4 * MAX_INDEXED_BYTES
"""The characters of a message's text read for its index (a 20 MB tool result is not
tokenized whole to keep its first 512 KiB)."""

_TOKEN_CATEGORIES: Final = frozenset({"Ll", "Lm", "Lo", "Nd", "Nl"})
_KANA_VOICING: Final = frozenset("\u3099\u309a")
_CJK_RANGES: Final = (
    (0x1100, 0x11FF),  # Hangul jamo
    (0x3005, 0x3007),  # iteration mark, closing mark, ideographic zero
    (0x3021, 0x3029),  # Hangzhou numerals
    (0x3038, 0x303B),
    (0x3040, 0x30FF),  # hiragana, katakana
    (0x3130, 0x318F),  # Hangul compatibility jamo
    (0x31F0, 0x31FF),  # katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xA960, 0xA97F),  # Hangul jamo extended A
    (0xAC00, 0xD7FF),  # Hangul syllables, jamo extended B
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0x1B000, 0x1B16F),  # kana supplement and extensions
    (0x20000, 0x3FFFF),  # CJK extensions B and later
)
_ASCII_WORD: Final = re.compile(r"[a-z0-9]+")
_SCIENTIFIC: Final = re.compile(r"[0-9]+e[0-9]+")

_SEPARATOR, _WORD, _CJK = 0, 1, 2


@dataclass(frozen=True, slots=True)
class Word:
    """A word or a CJK run of a text, folded, with where it is in the original text."""

    text: str
    """The folded characters (a word cut to :data:`MAX_TOKEN_CHARS`)."""
    cjk: bool
    """Whether this is a run of Han, Kana or Hangul characters."""
    spans: tuple[tuple[int, int], ...]
    """For each folded character, the (start, end) offsets of its cluster in the text."""

    @property
    def start(self) -> int:
        """Where the word starts in the original text."""
        return self.spans[0][0]

    @property
    def end(self) -> int:
        """Where the word ends in the original text (exclusive)."""
        return self.spans[-1][1]


def is_cjk(char: str) -> bool:
    """Whether ``char`` (folded) is Han, Kana or Hangul."""
    code = ord(char)
    return any(low <= code <= high for low, high in _CJK_RANGES)


@lru_cache(maxsize=65536)
def _kind(char: str) -> int:
    if unicodedata.category(char) not in _TOKEN_CATEGORIES:
        return _SEPARATOR
    if unicodedata.ucd_3_2_0.category(char)[0] not in "LN":
        return _SEPARATOR
    return _CJK if is_cjk(char) else _WORD


def _is_mark(char: str) -> bool:
    return unicodedata.category(char)[0] == "M"


@lru_cache(maxsize=65536)
def _continues(char: str) -> bool:
    """Whether ``char`` belongs to the cluster of the character before it."""
    code = ord(char)
    return (
        _is_mark(char)
        or 0x1160 <= code <= 0x11FF  # Hangul vowel and final jamo
        or 0xD7B0 <= code <= 0xD7FF
        or code in (0xFF9E, 0xFF9F)  # half-width voicing marks
    )


@lru_cache(maxsize=65536)
def fold(cluster: str) -> str:
    """The folded form of one cluster (see the module docstring)."""
    text = unicodedata.normalize("NFKD", unicodedata.normalize("NFKD", cluster).casefold())
    text = "".join(c for c in text if c in _KANA_VOICING or not _is_mark(c))
    return "".join(c for c in unicodedata.normalize("NFC", text) if not _is_mark(c))


def _clusters(text: str) -> Iterator[tuple[int, int]]:
    start = 0
    for index in range(1, len(text)):
        if not _continues(text[index]):
            yield start, index
            start = index
    if text:
        yield start, len(text)


def _folded(text: str) -> Iterator[tuple[str, tuple[int, int]]]:
    """Each folded character of ``text`` with the span of its cluster."""
    for start, end in _clusters(text):
        for char in fold(text[start:end]):
            yield char, (start, end)


def _word_cut(word: str) -> int:
    """Where a word must be cut for PostgreSQL's parser: after a leading ``12e3``."""
    found = _SCIENTIFIC.match(word)
    return found.end() if found is not None and found.end() < len(word) else len(word)


def _words(chars: list[tuple[str, tuple[int, int]]]) -> Iterator[Word]:
    text = "".join(char for char, _ in chars)
    spans = tuple(span for _, span in chars)
    while text:
        cut = _word_cut(text)
        yield Word(text[:cut][:MAX_TOKEN_CHARS], False, spans[:cut])
        text, spans = text[cut:], spans[cut:]


_ASCII_ANY_CASE: Final = re.compile(r"[A-Za-z0-9]+")


def _ascii_scan(text: str) -> list[Word]:
    """:func:`scan` of an ASCII text: each character folds to itself, lowercased."""
    found: list[Word] = []
    for match in _ASCII_ANY_CASE.finditer(text):
        start, word = match.start(), match.group().lower()
        while word:
            cut = _word_cut(word)
            spans = tuple((i, i + 1) for i in range(start, start + cut))
            found.append(Word(word[:cut][:MAX_TOKEN_CHARS], False, spans))
            word, start = word[cut:], start + cut
    return found


def scan(text: str) -> list[Word]:
    """The words and CJK runs of ``text``, in order, with their places in it."""
    if text.isascii():
        return _ascii_scan(text)
    found: list[Word] = []
    for kind, group in groupby(_folded(text), key=lambda item: _kind(item[0])):
        chars = list(group)
        if kind == _CJK:
            found.append(Word("".join(c for c, _ in chars), True, tuple(s for _, s in chars)))
        elif kind == _WORD:
            found.extend(_words(chars))
    return found


def cjk_tokens(run: str) -> list[str]:
    """The tokens of one CJK run: its characters, then its overlapping pairs."""
    return [*run, *(run[i : i + 2] for i in range(len(run) - 1))]


def _word_tokens(word: str) -> Iterator[str]:
    while word:
        cut = _word_cut(word)
        yield word[:cut][:MAX_TOKEN_CHARS]
        word = word[cut:]


def _each_token(text: str) -> Iterator[str]:
    """The tokens of ``text``, one at a time (an indexer stops at its cap)."""
    if text.isascii():
        for word in _ASCII_WORD.finditer(text.lower()):
            yield from _word_tokens(word.group())
        return
    folded = "".join(fold(text[start:end]) for start, end in _clusters(text))
    for kind, group in groupby(folded, key=_kind):
        if kind == _CJK:
            yield from cjk_tokens("".join(group))
        elif kind == _WORD:
            yield from _word_tokens("".join(group))


def tokens(text: str) -> list[str]:
    """The tokens of ``text``, in order (:func:`normalize` joins them with spaces): the
    tokens of :func:`scan`'s words, without their places."""
    return list(_each_token(text))


def normalize(text: str) -> str:
    """The tokens of ``text`` separated by single spaces (see the module docstring)."""
    return " ".join(tokens(text))


def message_text(message: Message) -> str:
    """What the model reads of ``message``, as the token counter counts it, one text a
    line: the author's name, texts, reasoning, call names and arguments, results."""
    return "\n".join(message_texts(message)[1])


_DIGIT_E_DIGIT: Final = re.compile(r"[0-9]e[0-9]")
"""In lowercased ASCII text, what may start a number with an exponent (after which the
index cuts a word): such text takes the general way."""


def _capped(text: str) -> str:
    """The normalized first tokens of ``text`` within :data:`MAX_INDEXED_TOKENS` and
    :data:`MAX_INDEXED_BYTES` (the text read no further than they need)."""
    text = text[:MAX_INDEXED_CHARS]
    if text.isascii():  # the common case in one pass of the regular expressions
        lowered = text.lower()
        words = _ASCII_WORD.findall(lowered)
        if not words:
            return ""
        if max(map(len, words)) <= MAX_TOKEN_CHARS and not _DIGIT_E_DIGIT.search(lowered):
            joined = " ".join(words)
            if len(words) <= MAX_INDEXED_TOKENS and len(joined) <= MAX_INDEXED_BYTES:
                return joined
    kept: list[str] = []
    size = 0
    for token in _each_token(text):
        size += len(token.encode()) + 1
        if size > MAX_INDEXED_BYTES + 1 or len(kept) == MAX_INDEXED_TOKENS:
            break
        kept.append(token)
    return " ".join(kept)


def indexable_text(message: Message) -> str:
    """The normalized text to index for ``message``, within PostgreSQL's limits; its
    recall results left out (they quote other messages)."""
    from store.search.recall import without_recall_results

    return _capped(message_text(without_recall_results(message)))


def search_text_of(message: Message) -> str | None:
    """What a stored row of ``message`` keeps for search: its :func:`indexable_text`, or
    None when it is not searchable (a redaction's tombstone, nothing to index)."""
    if is_tombstone(message):
        return None
    return indexable_text(message) or None
