"""Where a gold plan's literals come from: the prompt, its own earlier tool results, or declared dates."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from fae.agents.plan_runner import PlanRun
from fae.tasks import load_suite
from fae.tasks.model import Rendered

_ID = re.compile(r"\b[a-z]+-[0-9a-f]{6}\b")
_INSTANT = re.compile(r"\b(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2})(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:\d{2})?")
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_NUMBER = re.compile(r"(?<![\w.-])\d+(?:\.\d+)?(?![\w])")


def _known(rendered: Rendered, results: list[Any], derived: Sequence[str]) -> str:
    shown = [str(rendered.params[name]) for name in derived]
    return "\n".join([rendered.prompt, *shown, *(json.dumps(r) for r in results)])


def _unexplained(text: str, known: str, prompt: str) -> list[str]:
    found = []
    for token in _ID.findall(text):
        if token not in known:
            found.append(token)
    for match in _INSTANT.finditer(text):
        whole, day, clock = match.group(0), match.group(1), match.group(2)
        if whole not in known and not (day in known and clock in prompt):
            found.append(whole)
    stripped = _INSTANT.sub(" ", text)
    for day in _DATE.findall(stripped):
        if day not in known:
            found.append(day)
    return found


def hidden_literals(rendered: Rendered, run: PlanRun, derived: Sequence[str] | None = None) -> list[str]:
    """Ids, instants and dates in the gold's calls and answer that nothing before them showed.

    ``derived``: the parameters the agent works out from the prompt (the task's ``derived``;
    looked up in the task suite when not given).
    """
    if derived is None:
        derived = list(load_suite()[rendered.task_id].derived)
    problems = []
    results: list[Any] = []
    for index, (name, args, outcome) in enumerate(run.calls):
        known = _known(rendered, results, derived)
        for token in _unexplained(json.dumps(args), known, rendered.prompt):
            problems.append(f"call {index + 1} ({name}) uses {token}")
        results.append(outcome.result)
    known = _known(rendered, results, derived)
    answer = run.answer or ""
    for token in _unexplained(answer, known, rendered.prompt):
        problems.append(f"the answer uses {token}")
    numbers = set(_NUMBER.findall(known))
    for number in _NUMBER.findall(_ID.sub(" ", answer)):
        if number not in numbers:
            problems.append(f"the answer uses the number {number}")
    return problems
