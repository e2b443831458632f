"""Optional, seeded paraphrase of a rendered prompt, with a guard that nothing a validator needs is lost.

The paraphrase itself comes from an LLM that the harness calls through the recording proxy,
so it is in the log: this module only writes the request and checks the reply. The date and
time block is never paraphrased; every id, code, system, date, number, name and answer tag
of the original body must appear verbatim in the paraphrase, or the paraphrase is refused.
"""

from __future__ import annotations

import dataclasses
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
    r"</?[A-Z_]+>"  # answer tags
    r"|\b\w+://[^\s,;)]+"  # code systems and other URLs
    r"|\b[a-z]+-[0-9a-f]{6}\b"  # resource ids
    r"|\b\d{4}-\d{2}-\d{2}(?:T[\d:]+Z)?"  # dates and instants
    r"|\b\d{1,2}:\d{2}\b"  # clock times
    r"|\b[A-Z][A-Z0-9]+(?:-[A-Z0-9]+)*\b"  # codes such as FTH, WGS-RD, NONE
    r"|\b\d[\d.-]*\d\b|\b\d\b"  # numbers, phone numbers, SNOMED and LOINC codes
)


def _split(prompt: str) -> tuple[str, str]:
    """(clock block, body): the clock and the answer rules are the suite's own words, never paraphrased."""
    clock, _, body = prompt.partition("\n\n")
    return clock, body.strip().removesuffix(ANSWER_RULES).strip()


def must_keep(rendered: Rendered) -> list[str]:
    """The strings a paraphrase of the prompt's body must carry verbatim, in first-seen order."""
    _, body = _split(rendered.prompt)
    found: dict[str, None] = dict.fromkeys(m.group(0) for m in _TOKENS.finditer(body))
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


def paraphrase_request(rendered: Rendered, *, seed: int, model: str = "default") -> dict[str, Any]:
    """An OpenAI-style chat-completions body asking for one paraphrase of the prompt's body."""
    _, body = _split(rendered.prompt)
    return {
        "model": model,
        "seed": seed,
        "temperature": 0.7,
        "messages": [
            {"role": "system", "content": INSTRUCTIONS},
            {"role": "user", "content": body.strip()},
        ],
    }


def accept_paraphrase(rendered: Rendered, text: str) -> tuple[str | None, list[str]]:
    """The paraphrased prompt (clock block kept) and [] — or None and what the paraphrase lost."""
    text = text.strip().removesuffix(ANSWER_RULES).strip()
    missing = [token for token in must_keep(rendered) if token not in text]
    if missing or not text.strip():
        return None, missing or ["(empty paraphrase)"]
    clock, _ = _split(rendered.prompt)
    return f"{clock}\n\n{text}\n\n{ANSWER_RULES}\n", []


def paraphrased(rendered: Rendered, text: str) -> Rendered:
    """The variation with its prompt replaced by an accepted paraphrase; TaskError if it lost something."""
    prompt, missing = accept_paraphrase(rendered, text)
    if prompt is None:
        raise TaskError(f"paraphrase of {rendered.task_id} lost {missing}")
    return dataclasses.replace(rendered, prompt=prompt)
