"""Text that may hold JSON: a tool's arguments or result, a rule's value on the command line."""

from __future__ import annotations

import json
from typing import Any


def json_or_text(value: Any) -> Any:
    """``value`` decoded where it is text holding JSON; text that is not JSON, and anything not text, as it is."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value
