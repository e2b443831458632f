"""A rule set in words, the one way every command and the report names one: ``name=value, … (hash)``.

The pairs are sorted by name; a value is written as `fae rejudge --rule` takes it (true/false, a number, a
word as it is, anything else as JSON), so a label can be pasted back. The hash is the first eight characters
of the rule set's hash (``fae.judge.registry.rule_set_hash``), which `fae sql` finds in ``verdicts``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from fae.util.visible import visible

HASH = 8
"""Characters of a rule set's hash shown."""

_WORD = re.compile(r"[A-Za-z0-9_.:/@+-]+")


def rule_value(value: Any) -> str:
    """A rule's value as the command line takes it: ``true``, ``1.0``, ``proxy``, ``["AuditEvent"]``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) and _WORD.fullmatch(value) and value.lower() not in ("true", "false", "null"):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def rule_set_label(
    rules: Mapping[str, Any] | None,
    digest: str | None = None,
    *,
    defaults: Mapping[str, Any] | None = None,
    empty: str = "no rules",
) -> str:
    """``accept_corrections=false, settle_s=2.0 (19d98351)``: the rules, then the hash when given.

    With ``defaults`` (a judge's default rules), rules at their default are left out and a set of defaults
    only reads ``defaults``; a judge that takes no rules reads ``empty``.
    """
    rules = dict(rules or {})
    if defaults is not None:
        shown = {key: value for key, value in rules.items() if key not in defaults or defaults[key] != value}
        words = ", ".join(f"{key}={rule_value(value)}" for key, value in sorted(shown.items()))
        words = words or ("defaults" if rules else empty)
    else:
        words = ", ".join(f"{key}={rule_value(value)}" for key, value in sorted(rules.items())) or empty
    hashed = f"({digest[:HASH]})" if digest else ""
    return visible(" ".join(part for part in (words, hashed) if part))
