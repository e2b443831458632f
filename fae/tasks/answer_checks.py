"""Judging the answer tags of a check spec: one right value per single-valued tag, no hedging.

Answer checks, by kind (see docs/tasks.md for what passes and fails)::

    {id: X}               exactly one id, X (or, when X is NONE, a "nothing found" word)
    {ids: [..] | "a, b"}  the same set of ids, or a "nothing found" word when none is expected
    {none: true}          a "nothing found" word
    {count: n}            exactly one whole number, n
    {number: x}           exactly one number equal to x within ``tolerance`` (0.05 by default), unit optional
    {term: X, among: [..]} names X and no other word of ``among``
    {created: Type}       exactly one id, the resource of that type the agent created
    {updated: Type/id}    exactly one id, that resource's
    {words: "a b"}        names every one of these words

An empty tag never means "nothing found": every prompt asks for the word NONE.
A tag repeated with different contents fails (``answers.Contradiction``). In both modes a tag
that holds only a placeholder (``id``, or the prompt's answer format echoed back) gives no
answer, and a value the answer negates ("not slot-1", "No pathogenic variant in TP53",
``fae.tasks.negation``) is no answer either.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from fae.tasks import answers
from fae.tasks.check_spec import ANSWER_KINDS, AnswerCheck
from fae.tasks.negation import negation

DEFAULT_TOLERANCE = Decimal("0.05")


def expected_ids(ids: str | list[str]) -> list[str]:
    """The ids an ``ids`` answer check wants: a list, or one comma-separated string."""
    if isinstance(ids, str):
        return [] if answers.is_none(ids) else answers.id_list(ids)
    return [answers.bare_id(i) for i in ids]


def _single(text: str) -> list[str]:
    return [] if answers.is_none(text) else answers.id_list(text)


ValueRule = Callable[[str, AnswerCheck, str, Mapping[str, str]], "str | None"]
"""What is wrong with one tag's text (tag, its check, the text, the ids the agent created by type), or None."""


def _one_id(tag: str, want: AnswerCheck, text: str, chosen: Mapping[str, str]) -> str | None:
    expected = expected_ids(str(want.id))
    if not expected:
        return None if answers.is_none(text) else f"<{tag}> should say NONE, says {text!r:.80}"
    got = _single(text)
    if got != expected:
        return f"<{tag}> must hold exactly one id, {expected[0]}; says {got or text!r:.120}"
    return None


def _id_set(tag: str, want: AnswerCheck, text: str, chosen: Mapping[str, str]) -> str | None:
    expected = expected_ids(want.ids if want.ids is not None else [])
    got = _single(text)
    if not got and not answers.is_none(text):
        return f"<{tag}> is empty; nothing found is written NONE"
    if sorted(got) != sorted(expected):
        return f"<{tag}> says {got or 'NONE'}, expected {expected or 'NONE'}"
    return None


def _nothing(tag: str, want: AnswerCheck, text: str, chosen: Mapping[str, str]) -> str | None:
    return None if answers.is_none(text) else f"<{tag}> should say NONE, says {text!r:.80}"


def _count(tag: str, want: AnswerCheck, text: str, chosen: Mapping[str, str]) -> str | None:
    if answers.integer(text) != int(str(want.count)):
        return f"<{tag}> says {text!r:.40}, expected the one number {want.count}"
    return None


def _number(tag: str, want: AnswerCheck, text: str, chosen: Mapping[str, str]) -> str | None:
    found = answers.number(text)
    target = Decimal(str(want.number))
    tolerance = Decimal(str(want.tolerance if want.tolerance is not None else DEFAULT_TOLERANCE))
    if found is None or abs(found - target) > tolerance:
        return f"<{tag}> says {text!r:.40}, expected the one number {target} (±{tolerance})"
    return None


def _term(tag: str, want: AnswerCheck, text: str, chosen: Mapping[str, str]) -> str | None:
    named = answers.terms(text, _among(want))
    if named != [want.term]:
        return f"<{tag}> names {named or text!r:.80}, expected only {want.term}"
    return None


def _written(tag: str, want: AnswerCheck, text: str, chosen: Mapping[str, str]) -> str | None:
    ref = chosen.get(want.created or "") or want.updated
    wanted_id = answers.bare_id(ref) if ref else None
    got = answers.id_list(text)
    if got != [wanted_id]:
        return f"<{tag}> says {got}, expected exactly [{wanted_id}]"
    return None


def _words(tag: str, want: AnswerCheck, text: str, chosen: Mapping[str, str]) -> str | None:
    wanted = str(want.words).split()
    if len(answers.terms(text, wanted)) != len(wanted):
        return f"<{tag}> says {text!r:.80}, expected the words {want.words!r}"
    return None


VALUE_RULES: Mapping[str, ValueRule] = {
    "id": _one_id,
    "ids": _id_set,
    "none": _nothing,
    "count": _count,
    "number": _number,
    "term": _term,
    "created": _written,
    "updated": _written,
    "words": _words,
}
"""Each kind of answer check (``check_spec.ANSWER_KINDS``, the field of ``AnswerCheck`` it sets) and the rule that
reads a tag's value for it; the module's docstring says what each passes."""


def tag_problem(tag: str, want: AnswerCheck, text: str, chosen: Mapping[str, str]) -> str | None:
    """What is wrong with one tag's text against its check, or None (the first kind the check sets decides: a
    check file sets exactly one)."""
    for kind in ANSWER_KINDS:
        if getattr(want, kind) is not None:
            return VALUE_RULES[kind](tag, want, text, chosen)
    raise ValueError(f"unknown answer check for <{tag}>: {want}")


def _among(want: AnswerCheck) -> list[str]:
    """The words a ``term`` check tells its term apart from (the term alone when it names none)."""
    return list(want.among or []) or [str(want.term)]


def answer_problems_strict(
    spec: Mapping[str, AnswerCheck], answer: str | None, chosen: Mapping[str, str]
) -> tuple[list[str], dict[str, Any]]:
    """Problems with every answer tag: each there, consistent, not negated, and naming the right value."""
    return _problems_by_tag(spec, answer, chosen, tag_problem)


def answer_problems_light(
    spec: Mapping[str, AnswerCheck], answer: str | None, chosen: Mapping[str, str]
) -> tuple[list[str], dict[str, Any]]:
    """Problems with every answer tag: each there, non-empty, consistent and not negated; its value is not read."""
    return _problems_by_tag(spec, answer, chosen, _any_value)


def _any_value(tag: str, want: AnswerCheck, text: str, chosen: Mapping[str, str]) -> str | None:
    return None


def _problems_by_tag(
    spec: Mapping[str, AnswerCheck],
    answer: str | None,
    chosen: Mapping[str, str],
    value_problem: Callable[[str, AnswerCheck, str, Mapping[str, str]], str | None],
) -> tuple[list[str], dict[str, Any]]:
    """Problems with every answer tag, each value held to ``value_problem``, and what each tag said."""
    problems: list[str] = []
    said: dict[str, Any] = {}
    for tag, want in spec.items():
        try:
            text = answers.tag_value(answer, tag)
        except answers.Contradiction as exc:
            said[tag] = answers.tag_values(answer, tag)
            problems.append(str(exc))
            continue
        said[tag] = text
        if text is None:
            shown = answers.placeholders(answer, tag)
            problems.append(
                f"<{tag}> holds only the answer format, {shown!r:.80}, not an answer"
                if shown
                else f"answer has no <{tag}> tag"
            )
        elif not text.strip():
            problems.append(f"<{tag}> is empty; nothing found is written NONE")
        else:
            wrong = negated(tag, want, answer or "") or value_problem(tag, want, text, chosen)
            if wrong:
                problems.append(wrong)
    return problems, said


def value_spans(want: AnswerCheck, text: str) -> list[tuple[int, int]]:
    """Where a tag's text names its value, by the kind of check (the whole text when it names none)."""
    if want.term is not None or want.words is not None:
        vocabulary = _among(want) if want.term is not None else str(want.words).split()
        found = [(start, end) for start, end, _ in answers.term_spans(text, vocabulary)]
    elif want.number is not None:
        found = answers.number_spans(text)
    elif want.count is not None:
        found = answers.integer_spans(text)
    else:
        found = [(start, end) for start, end, _ in answers.id_spans(text)]
    return found or [(0, len(text))]


def negated(tag: str, want: AnswerCheck, answer: str) -> str | None:
    """What negates the value a tag names (in any of its occurrences), or None; "nothing found" is no value."""
    if want.none is not None:
        return None
    for found in answers.occurrences(answer, tag):
        if answers.is_placeholder(found.text, tag) or answers.is_none(found.text) or not found.text.strip():
            continue
        spans = [(found.text_start + a, found.text_start + b) for a, b in value_spans(want, found.text)]
        cue = negation(answer, (found.start, found.end), spans, finding=want.term is not None or want.words is not None)
        if cue:
            return f"<{tag}> negates what it names ({cue!r}): {answer[found.start : found.end]!r:.120}"
    return None
