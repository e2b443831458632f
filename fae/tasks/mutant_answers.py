"""Mutation agents whose answer only a reader of words can fault: the right value negated, the prompt's own
answer format echoed back instead of an answer; and honest rewordings of the right answer, which must pass."""

from __future__ import annotations

import re
from collections.abc import Callable

from fae.tasks import answers
from fae.tasks.answer_checks import expected_ids
from fae.tasks.check_spec import AnswerCheck
from fae.tasks.model import Rendered

Rewrite = Callable[[str], str]
"""The gold agent's answer -> the mutant's."""

_ANY_TAG = re.compile(r"<\s*([A-Z_][A-Z0-9_]*)\s*>(.*?)<\s*/\s*\1\s*>", re.DOTALL)
_SENTENCE_END = re.compile(r"(?<=[.?!])\s+")


def _content(tag: str, value: str) -> Rewrite:
    """Every ``<TAG>`` of the answer holding ``value`` instead."""
    return _around(tag, lambda _: f"<{tag}>{value}</{tag}>")


def _around(tag: str, wrap: Callable[[str], str]) -> Rewrite:
    """Every ``<TAG>…</TAG>`` of the answer replaced by ``wrap(the tag as written)``."""

    def rewrite(answer: str) -> str:
        out, last = [], 0
        for found in answers.occurrences(answer, tag):
            out += [answer[last : found.start], wrap(f"<{tag}>{found.text.strip()}</{tag}>")]
            last = found.end
        return "".join(out) + answer[last:]

    return rewrite


def _instead(tag: str, text: str) -> Rewrite:
    """Every ``<TAG>…</TAG>`` of the answer replaced by ``text`` (which holds the tag itself)."""
    return _around(tag, lambda _: text)


def is_value(want: AnswerCheck) -> bool:
    """Whether the tag's check wants a value (not "nothing found")."""
    if want.none is not None:
        return False
    if want.id is not None or want.ids is not None:
        return bool(expected_ids(str(want.id) if want.id is not None else want.ids or []))
    return True


def negated(tag: str, want: AnswerCheck, right: str) -> list[tuple[str, Rewrite]]:
    """The right value, negated inside the tag and around it (names: class.tag.n)."""
    if not is_value(want) or not right:
        return []
    if want.term is not None:
        term = want.term
        inside = [
            f"No pathogenic variant in {term}",
            f"{term} was not found",
            f"not {term}",
            f"negative for {term}",
            f"ruled out: {term}",
            f"{term}: negative",
            f"{term} wild-type",
        ]
        outside = [f"No pathogenic variant in <{tag}>{term}</{tag}>.", f"<{tag}>{term}</{tag}> was ruled out."]
        kind = "negated-term"
    elif want.number is not None or want.count is not None:
        inside = [f"not {right}", f"{right} is not right"]
        outside = [f"The value is not <{tag}>{right}</{tag}>."]
        kind = "negated-number"
    else:
        inside = [f"not {right}", f"{right} was not found", f"none of {right}"]
        outside = [f"I could not find <{tag}>{right}</{tag}>.", f"<{tag}>{right}</{tag}> does not exist."]
        kind = "negated-id"
    made = [_content(tag, text) for text in inside] + [_instead(tag, text) for text in outside]
    return [(f"{kind}.{tag}.{n}", rewrite) for n, rewrite in enumerate(made)]


def shown_format(rendered: Rendered, tag: str) -> str | None:
    """What the prompt shows inside ``<TAG>`` as the shape of its answer (``id``, ``new slot id``), if anything."""
    for found in answers.occurrences(rendered.prompt, tag):
        if not answers.is_none(found.text):
            return found.text
    return None


def instructions(rendered: Rendered) -> str:
    """The prompt's sentences that hold an answer tag: its answer contract, as an agent echoing it would copy it."""
    body = rendered.prompt.partition("\n\n")[2]
    return " ".join(s for s in _SENTENCE_END.split(body) if _ANY_TAG.search(s))


def echoes(rendered: Rendered, tag: str) -> list[tuple[str, Rewrite]]:
    """The tag holding the prompt's own answer format, or its own name, instead of an answer."""
    made = [(f"placeholder-echo.{tag}.name", _content(tag, tag))]
    shown = shown_format(rendered, tag)
    if shown is not None:
        made.append((f"placeholder-echo.{tag}.format", _content(tag, shown)))
    return made


def honest(rendered: Rendered, tag: str, want: AnswerCheck, right: str) -> list[tuple[str, Rewrite]]:
    """The right answer reworded: prose around the tag, the contract restated first, a label or wording inside."""
    made: list[tuple[str, Rewrite]] = [
        ("prose", _around(tag, lambda t: f"I checked the records. Here is the answer: {t} (as you asked).")),
    ]
    shown = shown_format(rendered, tag)
    if shown is not None:
        made.append(("restated", _around(tag, lambda t: f"You asked for <{tag}>{shown}</{tag}>; here it is: {t}")))
    if not is_value(want):
        made.append(("none-found", _around(tag, lambda t: f"I searched and found nothing that fits, so: {t}")))
    elif want.term is not None:
        term = want.term
        for text in (
            f"The gene is {term}.",
            f"{term} (no other variants found)",
            f"Pathogenic variant in {term}; no other findings.",
            f"The final report (not the preliminary one) names {term}.",
        ):
            made.append(("wording", _content(tag, text)))
    elif want.count is not None:
        made.append(("wording", _content(tag, f"There are {right}.")))
    elif want.number is not None:
        made.append(("wording", _content(tag, f"The latest value is {right} %.")))
    else:
        made.append(("label", _content(tag, f"The id is: {right}.")))
    return [(f"honest-wording.{tag}.{name}.{n}", rewrite) for n, (name, rewrite) in enumerate(made)]


def contract_echoed(rendered: Rendered) -> list[tuple[str, Rewrite]]:
    """The whole answer contract echoed as the answer (must fail), and echoed before the answer (must pass)."""
    said = instructions(rendered)
    return [
        ("placeholder-echo.instructions", lambda _answer: said),
        ("honest-wording.instructions-then-answer", lambda answer: f"{said}\n\n{answer}"),
    ]
