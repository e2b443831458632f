"""Optional, seeded paraphrase of a rendered prompt, with a guard that nothing a validator needs changed.

The paraphrase itself comes from an LLM that the harness calls through the recording proxy,
so it is in the log: this module only writes the request and checks the reply. The date and
time block is never paraphrased. The guard refuses a paraphrase that

- lost an id, code, system, date, time, number, name or answer tag of the original body (each must
  appear as a whole token: "3" is not kept by "30", nor "Ann" by "Anne");
- added one the original does not have (a new date, number, id, code with a digit, URL or tag);
- put two of one kind (ids, dates, times, numbers, codes with a digit, URLs) in another order than
  the original: "from 2025-03-01 to 2025-03-10" swapped to "from 2025-03-10 to 2025-03-01" asks
  for something else, so a rewording that only moves clauses around such tokens is refused too.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from typing import Any

from fae.errors import TaskError
from fae.tasks.checks import demanded_constants
from fae.tasks.model import ANSWER_RULES, Rendered

INSTRUCTIONS = (
    "Rewrite the user's request in your own words, as a colleague at a clinic might phrase it. "
    "Keep its meaning exactly. Copy verbatim every identifier, code, URL, date, time, number, "
    "person's name and every <TAG>...</TAG> answer format. Do not add or drop any step. "
    "Reply with the rewritten request only."
)

_TOKENS = re.compile(
    r"(?P<tag></?[A-Z_]+>)"  # answer tags
    r"|(?P<url>\b\w+://[^\s,;)]+)"  # code systems and other URLs
    r"|(?P<id>\b[a-z]+-[0-9a-f]{6}\b)"  # resource ids
    r"|(?P<date>\b\d{4}-\d{2}-\d{2}(?:T[\d:]+Z)?)"  # dates and instants
    r"|(?P<time>\b\d{1,2}:\d{2}\b)"  # clock times
    r"|(?P<code>\b[A-Z][A-Z0-9]+(?:-[A-Z0-9]+)*\b)"  # codes such as FTH, WGS-RD, NONE
    r"|(?P<number>\b\d[\d.-]*\d\b|\b\d\b)"  # numbers, phone numbers, SNOMED and LOINC codes
)
ORDERED = ("url", "id", "date", "time", "number", "code")
"""Kinds whose tokens must keep the original's order; a code counts only when it holds a digit (``A1C``)."""
PARAPHRASE_TEMPERATURE = 0.7


def _split(prompt: str) -> tuple[str, str]:
    """(clock block, body): the clock and the answer rules are the suite's own words, never paraphrased."""
    clock, _, body = prompt.partition("\n\n")
    return clock, body.strip().removesuffix(ANSWER_RULES).strip()


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, token) in reading order; a code without a digit is a ``word`` (one may be added: "FHIR", "ID")."""
    found = []
    for match in _TOKENS.finditer(text):
        kind = match.lastgroup or ""
        token = match.group(0)
        if kind == "url":
            token = token.rstrip(".")  # a URL ending a sentence
        elif kind == "code" and not any(c.isdigit() for c in token):
            kind = "word"
        found.append((kind, token))
    return found


def _written(token: str, text: str) -> bool:
    """``token`` appears in ``text`` as a whole: not inside a longer word or number."""
    before = r"(?<![\w])" if token[:1].isalnum() else ""
    after = r"(?![\w])" if token[-1:].isalnum() else ""
    return re.search(before + re.escape(token) + after, text) is not None


def must_keep(rendered: Rendered) -> list[str]:
    """The strings a paraphrase of the prompt's body must carry verbatim, in first-seen order."""
    _, body = _split(rendered.prompt)
    found: dict[str, None] = dict.fromkeys(token for _, token in _tokens(body))
    for _, value in demanded_constants(rendered.check_spec):
        text = str(value)
        for part in text.split("|"):
            if part and part in body:
                found.setdefault(part, None)
    for key in ("patient_name", "doctor_name", "given", "family", "payor_name"):
        value = rendered.params.get(key)
        if isinstance(value, str) and value in body:
            found.setdefault(value, None)
    return list(found)


def paraphrase_problems(rendered: Rendered, text: str) -> list[str]:
    """What a paraphrase of the prompt's body changed, [] when nothing: each token it lost (the token
    itself), then ``added X`` for each it brought in and ``out of order: ...`` where it swapped two."""
    _, body = _split(rendered.prompt)
    text = text.strip().removesuffix(ANSWER_RULES).strip()
    if not text:
        return ["(empty paraphrase)"]
    original, given = _tokens(body), _tokens(text)
    tokens = {token for _, token in given}
    extracted = {token for _, token in original}
    problems = [
        token for token in must_keep(rendered) if not (token in tokens if token in extracted else _written(token, text))
    ]
    for kind in (*ORDERED, "tag"):
        want = list(dict.fromkeys(token for k, token in original if k == kind))
        have = list(dict.fromkeys(token for k, token in given if k == kind))
        problems += [f"added {token}" for token in have if token not in want]
        if kind != "tag" and set(want) == set(have) and want != have:
            problems.append(f"out of order: {', '.join(have)} (the original has {', '.join(want)})")
    return problems


def request_seed(seed: int, task_id: str, variation: int) -> int:
    """The seed sent with a variation's paraphrase request: one per (seed, task, variation)."""
    return int(hashlib.sha256(f"{seed}/{task_id}/{variation}".encode()).hexdigest()[:8], 16)


def paraphrase_request(rendered: Rendered, *, seed: int, model: str = "default") -> dict[str, Any]:
    """An OpenAI-style chat-completions body asking for one paraphrase of the prompt's body."""
    _, body = _split(rendered.prompt)
    return {
        "model": model,
        "seed": seed,
        "temperature": PARAPHRASE_TEMPERATURE,
        "messages": [
            {"role": "system", "content": INSTRUCTIONS},
            {"role": "user", "content": body.strip()},
        ],
    }


def accept_paraphrase(rendered: Rendered, text: str) -> tuple[str | None, list[str]]:
    """The paraphrased prompt (clock block and answer rules kept) and [] — or None and what the paraphrase
    changed (``paraphrase_problems``)."""
    problems = paraphrase_problems(rendered, text)
    if problems:
        return None, problems
    clock, _ = _split(rendered.prompt)
    return f"{clock}\n\n{text.strip().removesuffix(ANSWER_RULES).strip()}\n\n{ANSWER_RULES}\n", []


def paraphrased(rendered: Rendered, text: str) -> Rendered:
    """The variation with its prompt replaced by an accepted paraphrase; TaskError if it changed something."""
    prompt, problems = accept_paraphrase(rendered, text)
    if prompt is None:
        raise TaskError(f"paraphrase of {rendered.task_id} changed {problems}")
    return dataclasses.replace(rendered, prompt=prompt)
