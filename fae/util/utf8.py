"""Text and JSON that encode as UTF-8: a lone surrogate (valid in a Python string, as ``json.loads('"\\ud800"')``
makes one, never in UTF-8) becomes U+FFFD. Strings are checked only when encoding fails, which is rare."""

from __future__ import annotations

import re
from typing import Any

import msgspec

_SURROGATE = re.compile("[\ud800-\udfff]")


def utf8_text(value: str) -> str:
    """``value``, with every lone surrogate replaced by U+FFFD."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", value)
    return value


def utf8_tree(node: Any) -> Any:
    """A JSON-shaped value with every string in it (mapping keys too) made ``utf8_text``."""
    if isinstance(node, str):
        return utf8_text(node)
    if isinstance(node, dict):
        return {utf8_text(key) if isinstance(key, str) else key: utf8_tree(value) for key, value in node.items()}
    if isinstance(node, list):
        return [utf8_tree(item) for item in node]
    return node


def utf8_json(value: Any, encoder: msgspec.json.Encoder | None = None) -> bytes:
    """``value`` as msgspec JSON; where a lone surrogate stops that, with every string made ``utf8_text``."""
    encode = encoder.encode if encoder is not None else msgspec.json.encode
    try:
        return encode(value)
    except UnicodeEncodeError:
        return encode(utf8_tree(msgspec.to_builtins(value)))
