"""The price table the study's cost uses: fae's dated list prices (``prices.yaml``), overridable.

``--prices FILE`` (the same format) replaces the entries of the models it names and keeps the others;
``--price MODEL=IN/OUT[/CACHED]`` sets one model last. Every file is read with fae's bounded loader.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

import msgspec
import yaml

from fae.errors import FaeError
from fae.util.data_files import read_json, read_yaml

SHIPPED = Path(__file__).with_name("prices.yaml")


class _Entry(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None
    source: str = ""


class _File(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    date: datetime.date
    models: dict[str, _Entry]


@dataclass(frozen=True)
class Price:
    """USD per million tokens: uncached prompt, completion, prompt read from a cache, prompt written to one
    (None: priced as uncached prompt)."""

    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None
    source: str = ""


@dataclass(frozen=True)
class PriceTable:
    """Prices by model name, and where they came from (``fae's table of DATE``, a file, ``--price``)."""

    models: dict[str, Price] = field(default_factory=dict)
    origin: tuple[str, ...] = ()

    def with_prices(self, models: dict[str, Price], origin: str) -> PriceTable:
        """This table with ``models`` set (each replacing any entry of its name)."""
        return replace(self, models={**self.models, **models}, origin=(*self.origin, origin))


def _checked(value: float | None, what: str) -> float | None:
    if value is not None and (not math.isfinite(value) or value < 0):
        raise FaeError(f"{what} must be a price of 0 or more, not {value!r}")
    return value


def _prices(raw: object, where: str) -> tuple[str, dict[str, Price]]:
    try:
        found = msgspec.convert(raw if raw is not None else {}, _File)
    except msgspec.ValidationError as exc:
        raise FaeError(f"{where}: not a price table: {exc}") from None
    models = {}
    for name, entry in found.models.items():
        if not name.strip():
            raise FaeError(f"{where}: a model name is empty")
        for what in ("input", "output", "cached_input", "cache_write"):
            _checked(getattr(entry, what), f"{where}: {name}.{what}")
        models[name] = Price(entry.input, entry.output, entry.cached_input, entry.cache_write, entry.source)
    return found.date.isoformat(), models


def load_prices(path: str | Path) -> tuple[str, dict[str, Price]]:
    """(date, prices) of a price file (YAML, or JSON by its extension), parsed within fae's limits."""
    path = Path(path)
    try:
        raw = read_json(path) if path.suffix.lower() == ".json" else read_yaml(path)
    except FileNotFoundError:
        raise FaeError(f"no price file {path}") from None
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise FaeError(f"{path}: cannot read the price table: {str(exc).splitlines()[0]}") from None
    return _prices(raw, str(path))


@lru_cache(maxsize=1)
def shipped_prices() -> PriceTable:
    """fae's own table (``fae/report/prices.yaml``)."""
    date, models = load_prices(SHIPPED)
    return PriceTable(models, (f"fae's list prices of {date}",))


def parse_price(text: str) -> tuple[str, Price]:
    """``MODEL=IN/OUT[/CACHED]``: USD per million prompt, completion (and cached prompt) tokens."""
    model, sep, rates = text.rpartition("=")
    parts = rates.split("/")
    try:
        if not sep or not model or len(parts) not in (2, 3):
            raise ValueError
        values = [float(p) for p in parts]
    except ValueError:
        raise FaeError(
            f"--price {text!r} is not MODEL=IN/OUT[/CACHED] (USD per million tokens, e.g. gpt-4.1=2/8/0.5)"
        ) from None
    for value in values:
        _checked(value, f"--price {text!r}")
    return model, Price(values[0], values[1], values[2] if len(values) == 3 else None, None, "--price")


def price_table(files: Sequence[str | Path] = (), prices: dict[str, Price] | None = None) -> PriceTable:
    """fae's table, then each ``--prices`` file in turn, then the ``--price`` entries."""
    table = shipped_prices()
    for path in files:
        date, models = load_prices(path)
        table = table.with_prices(models, f"{Path(path).name} ({date})")
    if prices:
        table = table.with_prices(dict(prices), "--price")
    return table
