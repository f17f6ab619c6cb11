"""Prices for a usage report's ``cost``, read from a TOML or JSON file.

The file maps each model, as the provider names it (a TOML header may leave a dotted
name unquoted: ``[gpt-4.1]`` is read as the model ``gpt-4.1``), to its prices in currency per
million tokens: ``{"gpt-4.1": {"input": 2.0, "output": 8.0, "cache_read": 0.5,
"cache_write": 2.0}}`` (``cache_read`` and ``cache_write`` take the input price when
left out). None is built in: prices change.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path

from pydantic import ValidationError

from store.errors import InvalidInput
from store.usage.models import ModelPrice

__all__ = ["load_prices", "read_prices"]


_PRICE_KEYS = frozenset(ModelPrice.model_fields)


def _models(data: Mapping[object, object], prefix: str = "") -> Iterator[tuple[str, object]]:
    """Each model and its table. A model named with dots in a TOML table header left
    unquoted (``[gpt-4.1]``) is read by TOML as nested tables (``gpt-4`` holding ``1``):
    a table holding no price but only tables is such a name, joined back."""
    for key, value in data.items():
        name = f"{prefix}{key}"
        nested = (
            isinstance(value, Mapping)
            and value
            and not _PRICE_KEYS & set(value)
            and all(isinstance(v, Mapping) for v in value.values())
        )
        if nested:
            assert isinstance(value, Mapping)
            yield from _models(value, f"{name}.")
        else:
            yield name, value


def read_prices(data: object, *, source: str = "prices") -> dict[str, ModelPrice]:
    """The prices of ``data`` (a mapping of model to price table).

    Raises:
        InvalidInput: not a mapping of models to tables of the four prices.
    """
    if not isinstance(data, Mapping) or not data:
        raise InvalidInput(f"{source}: expected a table of models, each with its prices")
    prices: dict[str, ModelPrice] = {}
    for model, table in _models(data):
        if not isinstance(table, Mapping):
            raise InvalidInput(f"{source}: {model!r} must be a table of prices")
        try:
            prices[str(model)] = ModelPrice.model_validate(dict(table))
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "prices"
            raise InvalidInput(f"{source}: {model!r} {where}: {first['msg']}") from None
    return prices


def load_prices(path: str | Path) -> dict[str, ModelPrice]:
    """The prices in the TOML (``.toml``) or JSON file at ``path``.

    Raises:
        InvalidInput: the file cannot be read, does not parse, or holds no prices.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InvalidInput(f"cannot read prices from {path}: {error}") from None
    try:
        data: object = tomllib.loads(text) if path.suffix.lower() == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as error:
        kind = "TOML" if path.suffix.lower() == ".toml" else "JSON"
        raise InvalidInput(f"{path}: not valid {kind}: {error}") from None
    return read_prices(data, source=str(path))
