"""chatledger's query language, parsed in Python and compiled for each backend.

Grammar (terms are separated by whitespace; every term must match)::

    query   := term (whitespace term)*
    term    := word | phrase
    word    := a run of non-whitespace characters, optionally ending with ``*``
    phrase  := '"' any characters but '"' '"', optionally followed by ``*``

* A **word** is normalized like the indexed text (:mod:`store.search.text`), so one word
  may give several tokens: "foo-bar", "a.b@c.com" or "1.5" match their tokens as a
  phrase (next to each other, in order). A **phrase** is the same: its tokens in order.
* A **CJK run** in a term (Han, Kana, Hangul) matches where it is a substring of an
  indexed run: one character matches that character, a longer run the chain of its
  overlapping pairs. Within a term, a CJK run and the words around it are matched each
  on their own ("東京tower" needs 東京 and tower, not next to each other).
* A trailing ``*`` makes the term's last token a **prefix** (at least
  :data:`MIN_PREFIX_CHARS` characters). It is dropped after a CJK run, which already
  matches inside longer runs.
* A term without letters or digits ("--", "🙂") is ignored; a query left without terms
  is refused.

Refused with :class:`~store.errors.InvalidInput` (one line): an unbalanced quote, a quote
inside a word, parentheses, a column filter (``a:b``), a negation (``-word``), a ``*``
anywhere but at the end of a term, the operators ``AND``, ``OR``, ``NOT`` and ``NEAR``,
an empty query, and a query longer than :data:`MAX_QUERY_CHARS` characters or of more
than :data:`MAX_QUERY_TOKENS` tokens. Quote a term to search for any of these
characters or words as text.

Compiled forms (:func:`to_fts5`, :func:`to_tsquery`) quote every token, so no user text
reaches either syntax: FTS5 gets ``"a b"`` for a phrase (a ``"`` inside doubled),
``"tok" *`` for a prefix, terms separated by spaces (implicit AND); PostgreSQL's
``to_tsquery('simple', ...)`` gets ``'a' <-> 'b'`` for a phrase (a ``'`` doubled and a
backslash escaped), ``'tok':*`` for a prefix, terms joined by ``&``. Tokens hold only
letters and digits, so the escapes never apply to normalized text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from store.errors import InvalidInput
from store.search.text import MAX_TOKEN_CHARS, Word, cjk_tokens, scan

__all__ = [
    "MAX_QUERY_CHARS",
    "MAX_QUERY_TOKENS",
    "MIN_PREFIX_CHARS",
    "Phrase",
    "Query",
    "Term",
    "match_spans",
    "matches",
    "parse_query",
    "query_tokens",
    "scanned_spans",
    "to_fts5",
    "to_tsquery",
]

MAX_QUERY_CHARS: Final = 1000
"""The longest query, in characters."""
MAX_QUERY_TOKENS: Final = 64
"""The most tokens a query may compile to."""
MIN_PREFIX_CHARS: Final = 2
"""The shortest prefix (``a*`` would scan a whole index)."""

_OPERATORS: Final = frozenset({"AND", "OR", "NOT", "NEAR"})
_EXPONENT: Final = re.compile(r"(?<![A-Za-z0-9])[0-9]+[eE][0-9]+")
"""A number with an exponent (``12e3``): the index cuts a word after one."""


@dataclass(frozen=True, slots=True)
class Phrase:
    """Tokens that must appear next to each other, in order."""

    tokens: tuple[str, ...]
    """The normalized tokens (a CJK run's single character or its pairs)."""
    prefix: bool = False
    """Whether the last token matches as a prefix."""
    cjk: bool = False
    """Whether this is a CJK run (matched as a substring of an indexed run)."""

    @property
    def run(self) -> str:
        """The characters of a CJK run (its pairs overlap by one character)."""
        return self.tokens[0] + "".join(token[-1] for token in self.tokens[1:])


@dataclass(frozen=True, slots=True)
class Term:
    """One word or quoted phrase of the query: all its phrases must match."""

    text: str
    """What the query said (a phrase without its quotes)."""
    phrases: tuple[Phrase, ...]
    """What must match, never empty."""


@dataclass(frozen=True, slots=True)
class Query:
    """A parsed query: every term must match."""

    text: str
    """The query as given."""
    terms: tuple[Term, ...]
    """The terms, in the order of the query, never empty."""


def _refuse(reason: str) -> InvalidInput:
    return InvalidInput(f"invalid search query: {reason}")


def _check_word(word: str) -> None:
    if word in _OPERATORS:
        raise _refuse(f'operators are not supported (every word must match): quote "{word}"')
    if '"' in word:
        raise _refuse("a quote must open a phrase at the start of a word")
    if "(" in word or ")" in word:
        raise _refuse("parentheses are not supported: quote text that holds them")
    if ":" in word:
        raise _refuse("column filters (a:b) are not supported: quote text that holds ':'")
    if word.startswith("-"):
        raise _refuse("negation (-word) is not supported: quote text that starts with '-'")
    if "*" in word[:-1]:
        raise _refuse("'*' is allowed only at the end of a word (a prefix)")


def _quoted(text: str, index: int) -> tuple[str, bool, int]:
    """The phrase opening at ``index``: its text, whether ``*`` follows, where it ends."""
    close = text.find('"', index + 1)
    if close < 0:
        raise _refuse("unbalanced quote")
    prefix = text.startswith("*", close + 1)
    end = close + 1 + prefix
    if end < len(text) and not text[end].isspace():
        raise _refuse("a phrase must be followed by a space or the end")
    return text[index + 1 : close], prefix, end


def _raw_terms(text: str) -> Iterator[tuple[str, bool]]:
    """Each term's text and whether it ends with ``*``."""
    index = 0
    while index < len(text):
        if text[index].isspace():
            index += 1
        elif text[index] == '"':
            body, prefix, index = _quoted(text, index)
            yield body, prefix
        else:
            end = next((i for i in range(index, len(text)) if text[i].isspace()), len(text))
            word = text[index:end]
            _check_word(word)
            index = end
            yield word.removesuffix("*"), word.endswith("*")


def _run_tokens(run: str) -> tuple[str, ...]:
    """A CJK run of a query: its one character, or the chain of its pairs."""
    return (run,) if len(run) == 1 else tuple(cjk_tokens(run)[len(run) :])


def _phrases(words: Sequence[Word]) -> Iterator[Phrase]:
    """The phrases of a term's words: each CJK run on its own, the words between together."""
    pending: list[str] = []
    for word in words:
        if not word.cjk:
            pending.append(word.text)
            continue
        if pending:
            yield Phrase(tuple(pending))
            pending = []
        yield Phrase(_run_tokens(word.text), cjk=True)
    if pending:
        yield Phrase(tuple(pending))


def _with_prefix(phrases: list[Phrase]) -> list[Phrase]:
    last = phrases[-1]
    if last.cjk:
        return phrases
    if len(last.tokens[-1]) < MIN_PREFIX_CHARS:
        raise _refuse(f"a prefix needs at least {MIN_PREFIX_CHARS} characters before '*'")
    return [*phrases[:-1], Phrase(last.tokens, prefix=True)]


def _term(text: str, prefix: bool) -> Term | None:
    phrases = list(_phrases(scan(text)))
    if not phrases:
        if prefix:
            raise _refuse("a prefix needs letters or digits before '*'")
        return None
    return Term(text, tuple(_with_prefix(phrases) if prefix else phrases))


def parse_query(text: str) -> Query:
    """Parse ``text`` (see the module docstring for the grammar).

    Raises:
        InvalidInput: the query uses syntax the language refuses, is empty or too long.
    """
    if len(text) > MAX_QUERY_CHARS:
        raise _refuse(f"longer than {MAX_QUERY_CHARS} characters ({len(text)})")
    terms = tuple(t for raw in _raw_terms(text) if (t := _term(*raw)) is not None)
    if not terms:
        raise _refuse("no word to search for")
    count = sum(len(p.tokens) for term in terms for p in term.phrases)
    if count > MAX_QUERY_TOKENS:
        raise _refuse(f"more than {MAX_QUERY_TOKENS} tokens ({count})")
    return Query(text, terms)


def _phrases_of(query: Query) -> Iterator[Phrase]:
    for term in query.terms:
        yield from term.phrases


def _fts5_phrase(phrase: Phrase) -> str:
    quoted = '"' + " ".join(phrase.tokens).replace('"', '""') + '"'
    return f"{quoted} *" if phrase.prefix else quoted


def to_fts5(query: Query) -> str:
    """The FTS5 ``MATCH`` expression of ``query`` (every token inside double quotes)."""
    return " ".join(map(_fts5_phrase, _phrases_of(query)))


def _lexeme(token: str, prefix: bool) -> str:
    quoted = "'" + token.replace("\\", "\\\\").replace("'", "''") + "'"
    return f"{quoted}:*" if prefix else quoted


def _tsquery_phrase(phrase: Phrase) -> str:
    last = len(phrase.tokens) - 1
    lexemes = [_lexeme(t, phrase.prefix and i == last) for i, t in enumerate(phrase.tokens)]
    return lexemes[0] if len(lexemes) == 1 else "(" + " <-> ".join(lexemes) + ")"


def to_tsquery(query: Query) -> str:
    """The text for PostgreSQL's ``to_tsquery('simple', ...)`` of ``query`` (every lexeme
    inside single quotes)."""
    return " & ".join(map(_tsquery_phrase, _phrases_of(query)))


def _token_matches(phrase: Phrase, index: int, token: str) -> bool:
    expected = phrase.tokens[index]
    if phrase.prefix and index == len(phrase.tokens) - 1:
        return token.startswith(expected)
    return token == expected


def _found_at(phrase: Phrase, found: Sequence[str], start: int) -> bool:
    return all(_token_matches(phrase, i, found[start + i]) for i in range(len(phrase.tokens)))


def _phrase_matches(phrase: Phrase, found: Sequence[str]) -> bool:
    last = len(found) - len(phrase.tokens)
    return any(_found_at(phrase, found, start) for start in range(last + 1))


def matches(query: Query, normalized_text: str) -> bool:
    """Whether the normalized text (:func:`~store.search.text.normalize`) matches
    ``query``, as FTS5 and PostgreSQL decide it."""
    found = normalized_text.split()
    return all(_phrase_matches(phrase, found) for phrase in _phrases_of(query))


def _word_spans(phrase: Phrase, words: Sequence[Word]) -> Iterator[tuple[int, int]]:
    size = len(phrase.tokens)
    for start in range(len(words) - size + 1):
        window = words[start : start + size]
        if not any(w.cjk for w in window) and _found_at(phrase, [w.text for w in window], 0):
            yield window[0].start, window[-1].end


def _run_spans(phrase: Phrase, words: Sequence[Word]) -> Iterator[tuple[int, int]]:
    run = phrase.run
    for word in (w for w in words if w.cjk):
        index = word.text.find(run)
        while index >= 0:
            yield word.spans[index][0], word.spans[index + len(run) - 1][1]
            index = word.text.find(run, index + 1)


@lru_cache(maxsize=256)
def _plain(query: Query) -> bool:
    """Whether every phrase is of ASCII words of less than :data:`MAX_TOKEN_CHARS`
    characters, none of them a number with an exponent (such words match in ASCII text
    as a regular expression finds them)."""
    return all(
        not phrase.cjk
        and all(
            t.isascii() and len(t) < MAX_TOKEN_CHARS and not _EXPONENT.search(t)
            for t in phrase.tokens
        )
        for term in query.terms
        for phrase in term.phrases
    )


@lru_cache(maxsize=256)
def _phrase_pattern(tokens: tuple[str, ...], prefix: bool) -> re.Pattern[str]:
    words = [re.escape(t) for t in tokens]
    if prefix:
        words[-1] += "[A-Za-z0-9]*"
    body = "[^A-Za-z0-9]+".join(words)
    return re.compile(rf"(?<![A-Za-z0-9])(?:{body})(?![A-Za-z0-9])", re.IGNORECASE)


def _ascii_spans(query: Query, text: str) -> list[tuple[int, int, int]]:
    """:func:`match_spans` of ASCII text and a :func:`_plain` query, by regular
    expressions (a word of ASCII text is a run of letters and digits, lowercased)."""
    found: list[tuple[int, int, int]] = []
    for number, term in enumerate(query.terms):
        for phrase in term.phrases:
            pattern = _phrase_pattern(phrase.tokens, phrase.prefix)
            found += [(*m.span(), number) for m in pattern.finditer(text)]
    found.sort()
    return found


def match_spans(query: Query, text: str) -> list[tuple[int, int, int]]:
    """Where ``query`` matches in the original ``text``: ``(start, end, term)`` for every
    occurrence of every phrase (``term`` is the term's index), sorted by position.

    Folding is honoured ("meteo" finds "Météo"); a term matching nowhere adds nothing.
    """
    if text.isascii() and _plain(query) and not _EXPONENT.search(text):
        return _ascii_spans(query, text)
    return scanned_spans(query, text)


def scanned_spans(query: Query, text: str) -> list[tuple[int, int, int]]:
    """:func:`match_spans` by scanning ``text`` with the index's folding (any text)."""
    words = scan(text)
    found: list[tuple[int, int, int]] = []
    for number, term in enumerate(query.terms):
        for phrase in term.phrases:
            spans = _run_spans(phrase, words) if phrase.cjk else _word_spans(phrase, words)
            found.extend((start, end, number) for start, end in spans)
    return sorted(found)


def query_tokens(query: Query) -> list[str]:
    """Every token of ``query``, in order (for tests and diagnostics)."""
    return [token for phrase in _phrases_of(query) for token in phrase.tokens]
