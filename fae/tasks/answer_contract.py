"""The prompt's own answer format, told apart from an answer: an agent that echoes the output contract
("answer with its id as <SLOT>id</SLOT>, or <SLOT>NONE</SLOT> if there is none") has not answered.

A tag occurrence in an answer is the contract echoed, and is marked so (``answers.echo_mark``, which the
answer checks read as a placeholder) when:

- it holds what the prompt itself shows inside an answer tag as the shape of an answer (``id``,
  ``new slot id``, ``symbol``, an example id), a "nothing found" word excepted: ``NONE`` is an answer;
- or it is copied from the prompt together with at least ``CONTEXT`` words of the prompt's text next to it,
  before or after (``…, or <SLOT_IDS>NONE</SLOT_IDS> if there are none.``): the instruction sentence
  echoed, whatever the tag holds.

An answer that restates the contract and then answers passes on its answer. Whitespace and case are
ignored in the comparison.
"""

from __future__ import annotations

import re
from functools import lru_cache

from fae.tasks import answers

CONTEXT = 3
"""Words of the prompt's own text next to a copied tag that make it an echo of the instruction."""

_ANY_TAG = re.compile(r"<\s*([A-Za-z_][\w-]*)\s*>(.*?)<\s*/\s*\1\s*>", re.DOTALL | re.IGNORECASE)
_SPACE = re.compile(r"\s+")


def _flat(text: str) -> str:
    return _SPACE.sub(" ", text).strip().casefold()


@lru_cache(maxsize=64)
def shown_formats(prompt: str) -> frozenset[str]:
    """What the prompt shows inside answer tags as the shape of an answer (flattened), "nothing found" words
    left out."""
    return frozenset(_flat(m.group(2)) for m in _ANY_TAG.finditer(prompt) if not answers.is_none(m.group(2)))


@lru_cache(maxsize=64)
def _flat_prompt(prompt: str) -> str:
    return _flat(prompt)


def _copied(prompt: str, answer: str, start: int, end: int) -> bool:
    """Whether the tag at answer[start:end] is copied from the prompt with CONTEXT words of it on one side."""
    tag = answer[start:end]
    flat = _flat_prompt(prompt)
    if _flat(tag) not in flat:
        return False  # most tags: what they hold is nowhere in the prompt
    before = answer[:start].split()[-CONTEXT:]
    after = answer[end:].split()[:CONTEXT]
    return (len(before) == CONTEXT and _flat(" ".join([*before, tag])) in flat) or (
        len(after) == CONTEXT and _flat(" ".join([tag, *after])) in flat
    )


def echoed(prompt: str, answer: str, tags: tuple[str, ...]) -> list[tuple[str, answers.Occurrence]]:
    """(tag, occurrence) of each answer tag that only echoes the prompt's answer format, in answer order."""
    shown = shown_formats(prompt)
    found = []
    for tag in tags:
        for occurrence in answers.occurrences(answer, tag):
            if _flat(occurrence.text) in shown or _copied(prompt, answer, occurrence.start, occurrence.end):
                found.append((tag, occurrence))
    return sorted(found, key=lambda item: item[1].start)


def mark_echoes(prompt: str, answer: str | None, tags: tuple[str, ...]) -> str | None:
    """The answer with each tag that echoes the prompt's answer format given ``answers.echo_mark`` content."""
    if not answer:
        return answer
    marked = answer
    for _tag, occurrence in reversed(echoed(prompt, answer, tags)):
        end = occurrence.text_start + len(occurrence.text)
        marked = marked[: occurrence.text_start] + answers.echo_mark(occurrence.text) + marked[end:]
    return marked
