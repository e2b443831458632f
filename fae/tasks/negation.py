"""Whether an answer negates the value its tag names: "No pathogenic variant in TP53", "not slot-1",
"TP53 was not found", "ruled out: <GENE>TP53</GENE>", "I could not find <SLOT>slot-1</SLOT>".

A NegEx-like reading, kept small and written down in docs/tasks.md ("Answer tags"):

- Only the clause holding the value counts. Clauses end at ``.``, ``!``, ``?`` (before a space or the
  end), ``;``, a new line, and before but (not "anything but"), however, although, though, whereas,
  except, yet, so, therefore, thus, hence. Outside the tag a cue counts only in the same comma-free
  stretch and at most ``WINDOW`` words from the tag; inside the tag, anywhere in the clause.
- A cue before the value negates it: no, not, none, neither, nor, without, anything but, never,
  cannot, an n't verb, negative, excluded, ruled out, absent, absence of, free of, lack(s) of, denies
  (and before a finding, benign and unlikely: "Benign variant in TP53"); unless a word between them
  turns the cue to something else (other, another, else, besides, apart, than: "no variant other
  than in TP53").
- A cue after the value negates it too. For a finding (a term: a gene, a diagnosis), that is any
  negation of it: not, nor, never, n't, negative, excluded, ruled out, absent, undetected, wild-type,
  benign, unlikely ("TP53 was not found", "TP53: negative"). For a record id or a number, only what
  denies that the value is there or is the answer: not found / not exist / not the one / not right,
  missing, nonexistent, wrong, excluded, ruled out ("slot-1 does not exist"); a record's state is
  not a negation ("slot-1 is not booked any more"). "none" after a value counts only right after it
  ("TP53: none"); "no", "without" and "not a/the …" after the value speak of what follows them
  ("TP53 (no other variants found)", "TP53, not a VUS"), unless a verb stands before the "not"
  ("TP53 is not the gene").
- Pseudo-negations never count: no/not/nothing/none + other(s), further, additional, more, longer, else,
  only, just; "none other than"; "not counting", "not including".
- A parenthetical that neither holds the value nor directly follows it is a side remark ("The final
  report (not the preliminary one) names TP53").
"""

from __future__ import annotations

import re
from collections.abc import Sequence

WINDOW = 5
"""Words between a cue outside the tag and the tag, at most."""

_BOUNDARY = re.compile(
    r"[.!?](?=\s|$)|[;\n]|\b(?<!anything )(?<!everything )(?<!all )(?:but)\b"
    r"|\b(?:however|although|though|whereas|except|yet|so|therefore|thus|hence)\b",
    re.IGNORECASE,
)
_PSEUDO = re.compile(
    r"\b(?:no|not|nothing|none)\s+(?:other|others|further|additional|more|longer|else|only|just)\b"
    r"|\bnone\s+other\s+than\b|\bnot\s+(?:counting|including)\b",
    re.IGNORECASE,
)
_ELSEWHERE = re.compile(r"\b(?:other|another|else|besides|apart|than)\b", re.IGNORECASE)
_TAGGED = re.compile(r"<\s*([A-Za-z_][\w-]*)\s*>.*?<\s*/\s*\1\s*>", re.DOTALL | re.IGNORECASE)
_MARKUP = re.compile(r"<\s*/?\s*[A-Za-z_][\w-]*\s*>")
_PARENTHETICAL = re.compile(r"\([^()]*\)")
_WORD = re.compile(r"\w+")
_RIGHT_AFTER = re.compile(r"^[\s:=\-–—]*$")
_DETERMINER = re.compile(r"\s+(?:a|an|the|any|another|this|that|these|those|its|their)\b", re.IGNORECASE)
_VERB_BEFORE = re.compile(
    r"\b(?:is|was|are|were|be|been|being|does|did|do|has|have|had|could|would|should|may|might|must|will)\s*$",
    re.IGNORECASE,
)


def _cue(pattern: str) -> re.Pattern[str]:
    return re.compile(rf"\b(?:{pattern})\b", re.IGNORECASE)


_NOT = r"not|(?:is|was|are|were|do|does|did|has|have|had|could|would|should|ca|wo|must|need)n[’']t|cannot|never"
_BEFORE = _cue(
    rf"{_NOT}|no|none|neither|nor|without|(?:anything|everything|all)\s+but|negative|excluded?|ruled?\s+out"
    r"|rules\s+out|absent|absence\s+of"
    r"|free\s+of|lack(?:s|ing)?(?:\s+of)?|den(?:y|ies|ied)"
)
_BEFORE_FINDING = _cue("benign|unlikely")
_AFTER_FINDING = _cue(rf"{_NOT}|nor|negative|excluded?|ruled?\s+out|absent|undetected|wild[-\s]?type|benign|unlikely")
_AFTER_RECORD = _cue(
    rf"(?:{_NOT})\s+(?:\w+\s+)?(?:found|exists?|existed|present|there|located|correct|right|valid|it"
    r"|the\s+(?:one|answer|right|correct))|missing|nonexistent|non-existent|wrong|incorrect|excluded|ruled\s+out"
)
_NONE = _cue("none")
# The first word of every cue: an answer with none of them negates nothing (most answers; checked first).
_CUE_WORDS = frozenset(
    "no not none neither nor without never cannot negative excluded exclude excludes ruled rule rules absent "
    "absence free lack lacks lacking deny denies denied benign unlikely undetected wild wildtype missing "
    "nonexistent non wrong incorrect anything everything all".split()
)
_WORDS = re.compile(r"[a-z’']+")


def negation(answer: str, tag: tuple[int, int], values: Sequence[tuple[int, int]], *, finding: bool) -> str | None:
    """The cue that negates one of the values (spans in ``answer``, inside the tag spanning ``tag``), or None.

    ``finding``: the value is a term (a gene, a diagnosis), which any negation after it denies; else a
    record id or a number, which only a denial that it is there or is the answer does.
    """
    if not _CUE_WORDS.intersection(_WORDS.findall(answer.casefold())) and "n't" not in answer and "n’t" not in answer:
        return None  # most answers: no cue anywhere, nothing to weigh
    text = _prose(answer, tag)
    before = (_BEFORE, _BEFORE_FINDING) if finding else (_BEFORE,)
    for value in values:
        found = _negates(text, tag, value, before, _AFTER_FINDING if finding else _AFTER_RECORD)
        if found:
            return found
    return None


def _blank(text: str, start: int, end: int) -> str:
    return text[:start] + " " * (end - start) + text[end:]


def _prose(answer: str, tag: tuple[int, int]) -> str:
    """The answer as prose around one tag: other tags' contents and all tag markup blanked, offsets kept."""
    text = answer
    for other in _TAGGED.finditer(answer):
        if other.end() <= tag[0] or other.start() >= tag[1]:
            text = _blank(text, other.start(), other.end())
    for markup in _MARKUP.finditer(text):
        text = _blank(text, markup.start(), markup.end())
    return text


def _clause(text: str, value: tuple[int, int]) -> str:
    """The text with everything outside the value's clause, side remarks and pseudo-negations blanked."""
    start, end = 0, len(text)
    for boundary in _BOUNDARY.finditer(text):
        if boundary.end() <= value[0]:
            start = boundary.end()
        elif boundary.start() >= value[1]:
            end = boundary.start()
            break
    clause = " " * start + text[start:end]
    for group in _PARENTHETICAL.finditer(clause):
        holds = group.start() <= value[0] and value[1] <= group.end()
        follows = group.start() >= value[1] and not clause[value[1] : group.start()].strip(" \t,:-–—")
        if not holds and not follows:
            clause = _blank(clause, group.start(), group.end())
    for pseudo in _PSEUDO.finditer(clause):
        clause = _blank(clause, pseudo.start(), pseudo.end())
    return clause


def _negates(
    text: str,
    tag: tuple[int, int],
    value: tuple[int, int],
    before: tuple[re.Pattern[str], ...],
    after: re.Pattern[str],
) -> str | None:
    clause = _clause(text, value)
    for cue in (cue for pattern in before for cue in pattern.finditer(clause, 0, value[0])):
        between = clause[cue.end() : value[0]]
        if not _ELSEWHERE.search(between) and _reaches(clause, cue.end(), tag[0], outside=cue.start() < tag[0]):
            return cue.group(0)
    for cue in after.finditer(clause, value[1]):
        if _after(clause, cue, value) and _reaches(clause, tag[1], cue.start(), outside=cue.start() >= tag[1]):
            return cue.group(0)
    for cue in _NONE.finditer(clause, value[1]):
        if _RIGHT_AFTER.match(clause[value[1] : cue.start()]):
            return cue.group(0)
    return None


def _reaches(clause: str, left: int, right: int, *, outside: bool) -> bool:
    """A cue outside the tag reaches it only across at most WINDOW words and no comma."""
    if not outside:
        return True
    between = clause[left:right]
    return "," not in between and len(_WORD.findall(between)) <= WINDOW


def _after(clause: str, cue: re.Match[str], value: tuple[int, int]) -> bool:
    """Whether a cue after the value speaks of the value, not of what follows the cue."""
    word = cue.group(0).casefold()
    if word == "not" and _DETERMINER.match(clause, cue.end()) and not _VERB_BEFORE.search(clause, 0, cue.start()):
        return False  # "TP53, not a VUS" speaks of what follows; "TP53 is not the gene" of TP53
    return True
