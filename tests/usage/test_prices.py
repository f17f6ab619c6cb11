"""Price files: TOML or JSON, a dotted model name left unquoted in TOML, bad files in one
line."""

from __future__ import annotations

from pathlib import Path

import pytest

from store.errors import InvalidInput
from store.usage import ModelPrice, load_prices


def test_a_dotted_name_left_unquoted_in_toml_is_one_model(tmp_path: Path) -> None:
    path = tmp_path / "prices.toml"
    path.write_text('[gpt-4.1]\ninput = 2.0\noutput = 8.0\n\n["o3"]\ninput = 1\noutput = 4\n')
    assert load_prices(path) == {
        "gpt-4.1": ModelPrice(input=2.0, output=8.0),
        "o3": ModelPrice(input=1, output=4),
    }


def test_json_prices_with_the_cache_lanes(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text(
        '{"claude-sonnet-4.5": {"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75}}'
    )
    price = load_prices(path)["claude-sonnet-4.5"]
    assert (price.cache_read, price.cache_write) == (0.3, 3.75)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[m]\ninput = 1\n", "'m' output: Field required"),
        ("[m]\ninput = -1\noutput = 1\n", "greater than or equal to 0"),
        ("[m]\ninput = nan\noutput = 1\n", "finite number"),
        ("[m]\ninput = 1\noutput = 1\nextra = 2\n", "Extra inputs are not permitted"),
        ("m = 3\n", "'m' must be a table of prices"),
        ("", "expected a table of models"),
        ("[m\n", "not valid TOML"),
    ],
)
def test_a_bad_file_is_refused_in_one_line(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "prices.toml"
    path.write_text(text)
    with pytest.raises(InvalidInput, match=says) as error:
        load_prices(path)
    assert "\n" not in str(error.value)
