"""Why a verdict is what it is, in plain words: one or two lines read from the verdict's evidence.

Every judge keeps its reasons in its evidence (``verdicts.evidence``), each in its own shape: the task's checks
write sentences (``reasons``), the failure-mode classifier names modes, ``ensure_record`` and the oracle name
problems and harms by code beside the records, elements and values they concern, ``state_drift`` lists the
resources where the log's writes and the server disagree. ``verdict_reasons`` says each in words (which record,
which element, what was expected and what was found); a judge it does not know (a plugin) gets its evidence as
short JSON. `fae show`, `fae runs` and the report's run view all use it. The lines are plain text with every
hidden character escaped (``fae.util.visible``); the HTML report escapes them again as HTML.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from fae.util.visible import visible

LINE = 200
"""Characters a reason line is cut at (the cut marked with an ellipsis)."""
VALUE = 60
"""Characters a value quoted inside a reason is cut at."""
CUT = "…"

Evidence = Mapping[str, Any]


def one_line(text: str) -> str:
    """``text`` on one line: hidden characters escaped, each run of whitespace (a newline too) one space."""
    return " ".join(visible(text).split())


def cut(text: str, limit: int = LINE) -> str:
    """``text`` on one line (``one_line``), cut at ``limit`` characters with the cut marked."""
    text = one_line(text)
    return text if len(text) <= limit else text[: limit - len(CUT)] + CUT


def shown(value: Any, limit: int = VALUE) -> str:
    """A value inside a sentence: text as it is, anything else as compact JSON; cut at ``limit``."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
    return cut(text, limit)


def listed(items: Sequence[Any], most: int = 3) -> str:
    """``a, b and c``; past ``most`` items, ``a, b, c and 4 more``."""
    names = [shown(item) for item in items]
    if len(names) > most:
        return ", ".join(names[:most]) + f" and {len(names) - most} more"
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1] if names else "nothing"


def calls(tools: Sequence[Any]) -> str:
    """The tools a run called, in order, a tool called several times in a row once with its count."""
    runs: list[list[Any]] = []
    for tool in tools:
        if runs and runs[-1][0] == tool:
            runs[-1][1] += 1
        else:
            runs.append([tool, 1])
    parts = [shown(tool, 40) + (f" ×{count}" if count > 1 else "") for tool, count in runs]
    return (", ".join(parts[:8]) + (f", … ({len(tools)} calls)" if len(parts) > 8 else "")) if parts else "none"


def _two_lines(sentences: Iterable[str]) -> list[str]:
    """Sentences as at most two lines: the first alone, the rest joined on the second, each cut."""
    found = [s for s in sentences if s]
    if not found:
        return []
    lines = [cut(found[0])]
    if len(found) > 1:
        lines.append(cut("; ".join(found[1:])))
    return lines


def _said(evidence: Evidence) -> list[str]:
    """The reason or error a verdict carries as a sentence (not_applicable, task_changed, error, unreadable)."""
    for key in ("reason", "error"):
        if isinstance(evidence.get(key), str) and evidence[key]:
            return [evidence[key]]
    return []


def _wrong_values(record: str, wrong: Sequence[Mapping[str, Any]], what: str) -> str:
    """``Patient/1 birthDate: expected 1990-01-02, found 1990-02-01`` for the first wrong elements."""
    if not wrong:
        return f"{record} {what}"
    parts = []
    for item in wrong[:2]:
        found = item.get("found")
        told = (
            "nothing"
            if found in ([], None)
            else shown(found[0] if isinstance(found, list) and len(found) == 1 else found)
        )
        parts.append(f"{item.get('element')}: expected {shown(item.get('expected'))}, found {told}")
    more = f" (and {len(wrong) - 2} more)" if len(wrong) > 2 else ""
    return f"{record} {what}: " + "; ".join(parts) + more


# --- task ---------------------------------------------------------------------------------------------------


def _task(outcome: str, evidence: Evidence) -> list[str]:
    reasons = [str(r) for r in evidence.get("reasons") or []]
    if not reasons:
        return _said(evidence)
    if len(reasons) > 2:
        return [cut(reasons[0]), cut(reasons[1], LINE - 20) + f" (and {len(reasons) - 2} more)"]
    return _two_lines(reasons)


# --- failure_mode -------------------------------------------------------------------------------------------

MODE_WORDS: dict[str, Callable[[Evidence], str]] = {
    "incorrect_tool_selection": lambda e: f"no required set of tools was called (called {calls(e.get('tools') or [])})",
    "incorrect_order": lambda e: f"the required tools were called out of order (called {calls(e.get('tools') or [])})",
    "incorrect_resource_type": lambda e: (
        f"no tool input or output named {listed(e.get('missing_resource_types') or [])}"
        if e.get("missing_resource_types")
        else "a required resource type was never touched"
    ),
    "prohibited_tool": lambda e: f"a prohibited tool was called (called {calls(e.get('tools') or [])})",
    "tool_error": lambda e: "a tool call returned an error",
    "no_tool_call": lambda e: "the agent called no tool",
    "errored": lambda e: "the run errored: not a failure of the agent's, left out of failure-mode shares",
    "other": lambda e: (
        f"failed strict, and no failure mode of its tool use applies (called {calls(e.get('tools') or [])})"
    ),
}


def _mode_words(mode: str, evidence: Evidence) -> str:
    words = MODE_WORDS.get(mode)
    return words(evidence) if words else mode.replace("_", " ")


def _failure_mode(outcome: str, evidence: Evidence) -> list[str]:
    if outcome == "none":
        return []
    modes = evidence.get("modes")
    named = [m for m in modes if isinstance(m, str)] if isinstance(modes, list) else []
    if not named:
        named = [outcome] if outcome in MODE_WORDS or "tools" in evidence else []
    if not named:
        return _said(evidence)
    return _two_lines(_mode_words(mode, evidence) for mode in named)


# --- ensure_record ------------------------------------------------------------------------------------------

_WHEN = {"read_back": "at the read-back", "after_check": "after the check"}


def _server(item: Mapping[str, Any]) -> str:
    """One difference between the server's answer and the fold (``fae.judge.readback``)."""
    record, when = item.get("record", "the record"), _WHEN.get(str(item.get("at")), "")
    difference = item.get("difference")
    if difference == "missing_on_server":
        return f"{record} was not on the server {when} (the log's writes leave version {item.get('fold_version')})"
    if difference == "only_on_server":
        return f"{record} was on the server {when}, though no write in the log made it"
    if difference == "content":
        elements = [e.get("element") for e in item.get("elements") or [] if isinstance(e, Mapping)]
        first = next((e for e in item.get("elements") or [] if isinstance(e, Mapping)), {})
        detail = (
            f": {first.get('element')} is {shown(first.get('server'))} there, {shown(first.get('fold'))} in the log"
        )
        return f"{record} on the server differs from the log's writes {when} in {listed(elements)}" + (
            detail if first else ""
        )
    return (
        f"{record} is version {item.get('server_version')} on the server {when}, "
        f"version {item.get('fold_version')} in the log's writes"
    )


def _server_difference(code: str) -> Callable[[str, Evidence], str]:
    """A difference between the server and the log's writes, said from the first one at the problem's moment."""
    at = "read_back" if code.endswith("read_back") else "after_check"

    def said(record: str, evidence: Evidence) -> str:
        found = [d for d in evidence.get("server_vs_fold") or [] if isinstance(d, Mapping) and d.get("at") == at]
        return _server(found[0]) if found else code.replace("_", " ")

    return said


def _writes(evidence: Evidence) -> list[Any]:
    return evidence.get("writes_to_record") or []


def _written_after_check(record: str, evidence: Evidence) -> str:
    after = evidence.get("writes_after_check") or []
    return f"{record} was written after the check (by {listed(sorted({str(w.get('actor')) for w in after}))})"


def _read_by_other_actor(record: str, evidence: Evidence) -> str:
    readers = sorted({str(r.get("actor")) for r in evidence.get("other_actor_reads") or []})
    return f"{listed(readers)} read {record} while it was being corrected"


PROBLEMS: Mapping[str, Callable[[str, Evidence], str]] = {
    "no_record_created": lambda record, e: "the agent created no record of the target's type",
    "final_values_wrong": lambda record, e: _wrong_values(
        record, e.get("wrong_values") or [], "does not hold the values asked for"
    ),
    "wrong_person": lambda record, e: _wrong_values(
        record, e.get("wrong_identity") or [], "is another person or thing"
    ),
    **{
        code: _server_difference(code)
        for code in ("missing_at_read_back", "differs_at_read_back", "missing_after_check", "differs_after_check")
    },
    "other_record_written": lambda record, e: f"the agent also wrote {listed(e.get('other_records_written') or [])}",
    "same_person_elsewhere": lambda record, e: (
        f"{listed(e.get('same_person_records') or [])} is the same person or thing as {record}"
    ),
    "written_after_check": _written_after_check,
    "version_count_mismatch": lambda record, e: (
        f"the server made {e.get('server_versions_in_window')} versions of {record} in the window, "
        f"the log shows {len(_writes(e))} writes"
    ),
    "changed_after_create": lambda record, e: (
        f"{record} was changed after its create ({len(_writes(e))} writes) and corrections are not accepted"
    ),
    "changed_after_update": lambda record, e: (
        f"{record} was changed after its update ({len(_writes(e))} writes) and corrections are not accepted"
    ),
    "not_one_write_then_updates": lambda record, e: (
        f"the writes to {record} are not one write then updates ({calls([w.get('op') for w in _writes(e)])})"
    ),
    "written_by_other_actor": lambda record, e: f"{record} was also written by {listed(e.get('other_writers') or [])}",
    "untimed_write": lambda record, e: f"a write to {record} has no time",
    "person_changed": lambda record, e: f"a version of {record} was another person or thing",
    "read_by_other_actor": _read_by_other_actor,
    "no_read_heartbeat": lambda record, e: "the trail records no reads, so a read by another actor cannot be ruled out",
    "settle_too_short": lambda record, e: f"settle_s={e.get('settle_s')} is under the 1 s a correction needs",
    "read_back_before_settling": lambda record, e: (
        f"the read-back came {e.get('settled_s')} s after the last write, under settle_s={e.get('settle_s')}"
    ),
    "record_not_written": lambda record, e: f"the agent never wrote {record}",
}
"""The write verifier's problems in words, by the name its rule prints (``fae.judge.verify.RULE_NAMES``): each from
the record under check and the verdict's evidence."""


def _problem(code: str, evidence: Evidence) -> str:
    said = PROBLEMS.get(code)
    return said(evidence.get("record") or "the record", evidence) if said is not None else code.replace("_", " ")


def _unreadable(evidence: Evidence) -> list[str]:
    if evidence.get("untimed_exchanges"):
        return [f"exchanges with no time in the window (seq {listed(evidence['untimed_exchanges'])})"]
    said = _said(evidence)
    if evidence.get("fold_problems"):
        said.append(f"fold problems: {shown(evidence['fold_problems'], LINE)}")
    return said


def _ensure_record(outcome: str, evidence: Evidence) -> list[str]:
    if outcome == "unreadable":
        return _two_lines(_unreadable(evidence))
    targets = [t for t in evidence.get("targets") or [] if isinstance(t, Mapping)]
    if targets:  # several records to write: each target's problems with its own record
        sentences = []
        for target in targets:
            for code in target.get("problems") or []:
                sentence = _problem(str(code), target)
                if sentence not in sentences:
                    sentences.append(sentence)
        return _two_lines(sentences) or _said(evidence)
    problems = [str(code) for code in evidence.get("problems") or []]
    return _two_lines(_problem(code, evidence) for code in problems) or _said(evidence)


# --- oracle -------------------------------------------------------------------------------------------------


def _state_check_failed(record: str, evidence: Evidence) -> str:
    problems = evidence.get("state_problems") or []
    return f"the task's state check fails: {problems[0]}" if problems else "the task's state check fails"


def _record_wrong_at_end(record: str, evidence: Evidence) -> str:
    wrong = [w for w in evidence.get("wrong_at_end") or [] if isinstance(w, Mapping)]
    if not wrong:
        return f"{record} is missing or wrong at the end"
    first = wrong[0]
    name = first.get("record") or "no record of the target"
    if first.get("missing") or not first.get("record"):
        return f"{name} is not on the server at the end"
    return _wrong_values(name, first.get("wrong") or [], "is wrong at the end")


def _exposed_while_wrong(record: str, evidence: Evidence) -> str:
    exposed = [e for e in evidence.get("exposed") or [] if isinstance(e, Mapping)]
    if not exposed:
        return f"another actor received {record} while it was wrong"
    first = exposed[0]
    return f"{first.get('actor')} received {first.get('record')} while it was wrong (seq {first.get('seq')})"


HARMS: Mapping[str, Callable[[str, Evidence], str]] = {
    "state_check_failed": _state_check_failed,
    "record_wrong_at_end": _record_wrong_at_end,
    "duplicate_person": lambda record, e: f"another record is the same person or thing as {record}",
    "collateral_change": lambda record, e: (
        f"{e.get('collateral', 'a record')} changed, though the task leaves it alone"
    ),
    "exposed_while_wrong": _exposed_while_wrong,
    "lost_update": lambda record, e: f"another user's change to {record} was lost",
    "deleted_on_the_way": lambda record, e: f"{record}, which existed before the run, was deleted on the way",
    "was_another_person": lambda record, e: f"{record} was another person or thing at some point",
    "unrecorded_change": lambda record, e: f"the server holds a version of {record} that no recorded write explains",
}
"""The oracle's harms in words, by the name its rule prints (``fae.judge.oracle.HARM_NAMES``): each from the
target records (listed) and the verdict's evidence."""


def _harm(code: str, evidence: Evidence) -> str:
    said = HARMS.get(code)
    if said is None:
        return code.replace("_", " ")
    records = [r for r in evidence.get("records") or [] if r]
    return said(listed(records) if records else "the target record", evidence)


def _oracle(outcome: str, evidence: Evidence) -> list[str]:
    harms = [str(h) for h in evidence.get("harms") or []]
    return _two_lines(_harm(h, evidence) for h in harms) or _said(evidence)


# --- state_drift --------------------------------------------------------------------------------------------


def _drift(item: Mapping[str, Any]) -> str:
    ref, difference = item.get("ref"), item.get("difference")
    if difference == "only_in_capture":
        return f"{ref} is on the server but no write in the log made it"
    if difference == "only_in_fold":
        return f"{ref} is in the log's writes but not on the server"
    if difference == "content":
        versions = f"server v{item.get('capture_version')}, log v{item.get('fold_version')}"
        return f"{ref} differs in {listed(item.get('elements') or [])} ({versions})"
    return f"{ref} is version {item.get('capture_version')} on the server, {item.get('fold_version')} in the log"


def _state_drift(outcome: str, evidence: Evidence) -> list[str]:
    found = [d for d in evidence.get("differences") or [] if isinstance(d, Mapping)]
    if not found:
        return _said(evidence)
    sentences = [_drift(found[0])]
    if len(found) > 1:
        sentences.append(_drift(found[1]) + (f" (and {len(found) - 2} more)" if len(found) > 2 else ""))
    return _two_lines(sentences)


# --- the rest -----------------------------------------------------------------------------------------------


def _soft(outcome: str, evidence: Evidence) -> list[str]:
    said = _said(evidence)
    if outcome == "error" or not said:
        return said
    return [f"{outcome.replace('_', ' ')}: {said[0]}"]


def _unknown(outcome: str, evidence: Evidence) -> list[str]:
    """A judge this module does not know: its reason if it gives one, else its evidence as short JSON."""
    if set(evidence) == {"value"}:  # evidence that was not a mapping (``evidence_of``): shown as it is
        return [shown(evidence["value"], LINE)]
    return _said(evidence) or ([shown(dict(evidence), LINE)] if evidence else [])


JUDGES: dict[str, Callable[[str, Evidence], list[str]]] = {
    "task": _task,
    "failure_mode": _failure_mode,
    "ensure_record": _ensure_record,
    "oracle": _oracle,
    "state_drift": _state_drift,
    "soft": _soft,
}
"""How each of fae's judges' evidence reads; a judge named here by ``~`` (a verifier mutant) reads as its base."""


def evidence_of(evidence: Any) -> Evidence:
    """A verdict's evidence as a mapping: stored JSON parsed, anything else under ``value``."""
    if isinstance(evidence, (str, bytes)):
        try:
            evidence = json.loads(evidence)
        except ValueError:
            return {"value": evidence}
    if isinstance(evidence, Mapping):
        return evidence
    return {} if evidence is None else {"value": evidence}


def verdict_reasons(judge: str, outcome: str, passed: bool | None, evidence: Any) -> list[str]:
    """Why a verdict is not a pass, in at most two lines; none for a pass.

    ``evidence`` is the verdict's evidence, as stored (JSON text) or parsed. A not-applicable verdict gives
    the reason it does not apply; ``error`` and ``task_changed`` (any judge) give what went wrong.
    """
    if passed is True:
        return []
    found = evidence_of(evidence)
    if outcome in ("error", "task_changed"):
        lines = _said(found)
    else:
        words = JUDGES.get(judge.split("~", 1)[0], _unknown)
        try:
            lines = words(outcome, found)
        except (AttributeError, TypeError, KeyError, IndexError, ValueError):  # evidence of an unexpected shape
            lines = _unknown(outcome, found)
    if not lines and passed is False:
        lines = ["no reason in its evidence"]
    return [cut(line) for line in lines[:2]]


def reason_line(judge: str, outcome: str, passed: bool | None, evidence: Any, limit: int = LINE) -> str:
    """``verdict_reasons`` on one line (a table cell): the lines joined, cut at ``limit``."""
    return cut("; ".join(verdict_reasons(judge, outcome, passed, evidence)), limit)
