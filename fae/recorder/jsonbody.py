"""Defensive JSON decoding of recorded bodies."""

from __future__ import annotations

import json
from typing import Any

from fae.store.bodies import Body, Pieces


def parse_json(body: Body | None) -> Any:
    """The JSON value of a body, or None when it is empty or not JSON."""
    if not body:
        return None
    try:
        return json.loads(body.joined() if isinstance(body, Pieces) else body)
    except (ValueError, UnicodeDecodeError):
        return None


def sse_data(body: bytes | None) -> list[Any]:
    """The JSON payloads of a server-sent-event stream's ``data:`` fields, in order."""
    if not body:
        return []
    text = body.decode("utf-8", errors="replace").replace("\r\n", "\n")
    values: list[Any] = []
    for block in text.split("\n\n"):
        data_lines = [line[5:].lstrip() if line.startswith("data:") else None for line in block.split("\n")]
        data = "\n".join(d for d in data_lines if d is not None)
        if not data or data == "[DONE]":
            continue
        try:
            values.append(json.loads(data))
        except ValueError:
            continue
    return values
