"""Query-side helpers: make a result small before it is bounded.

Most of the saving belongs here, where the tool still knows what its records mean: keep
the fields the model needs (:func:`select_fields`), return fewer records
(:func:`cap_records`), shorten long texts with a visible marker (:func:`cap_text`), and
page the rest (:func:`~strategies.bounded.paging.paginate`). The token budget is then
the final guard, not the design.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, TypeVar

from pydantic import BaseModel

from strategies.bounded.results import check_int

__all__ = ["TRUNCATION_MARKER", "cap_records", "cap_text", "select_fields"]

T = TypeVar("T")

TRUNCATION_MARKER: Final = "…[truncated]"
"""What :func:`cap_text` puts at the end of a shortened text."""
_MISSING: Final = object()


def _field(record: object, name: str) -> Any:
    if isinstance(record, Mapping):
        return record.get(name, _MISSING)
    if isinstance(record, BaseModel):
        names = type(record).model_fields.keys() | type(record).model_computed_fields.keys()
        return getattr(record, name) if name in names else _MISSING
    if dataclasses.is_dataclass(record) and not isinstance(record, type):
        known = {f.name for f in dataclasses.fields(record)}
        return getattr(record, name) if name in known else _MISSING
    raise TypeError(
        f"select_fields reads mappings, pydantic models and dataclasses, not a "
        f"{type(record).__qualname__}"
    )


def select_fields(records: Iterable[object], fields: Sequence[str]) -> list[dict[str, Any]]:
    """Each record as a dict of ``fields`` only, in the order of ``fields``.

    A record is a mapping, a pydantic model or a dataclass instance; a field it does not
    have is left out of its dict (never set to None). Values are not copied.
    """
    if isinstance(fields, str):
        raise TypeError("fields must be a sequence of field names, not one string")
    names = list(dict.fromkeys(fields))
    selected: list[dict[str, Any]] = []
    for record in records:
        row = {name: _field(record, name) for name in names}
        selected.append({name: value for name, value in row.items() if value is not _MISSING})
    return selected


def cap_records(records: Iterable[T], limit: int) -> list[T]:
    """The first ``limit`` records (fewer if there are fewer), reading no further."""
    check_int(limit, "limit", minimum=0)
    return list(itertools.islice(records, limit))


def cap_text(text: str, max_chars: int, *, marker: str = TRUNCATION_MARKER) -> str:
    """``text`` if it has at most ``max_chars`` characters, else its start and ``marker``.

    The marker is visible and counted: a shortened text has exactly ``max_chars``
    characters, marker included.

    Raises:
        ValueError: ``max_chars`` is shorter than the marker (whatever the text).
    """
    check_int(max_chars, "max_chars", minimum=0)
    if max_chars < len(marker):
        raise ValueError(
            f"max_chars={max_chars} is shorter than the marker {marker!r} "
            f"({len(marker)} characters)"
        )
    if len(text) <= max_chars:
        return text
    return text[: max_chars - len(marker)] + marker
