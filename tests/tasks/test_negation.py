"""A negated value is no answer, in strict and light alike; negation words that speak of something else
(another variant, the preliminary report, the slot's state) leave an honest answer passing."""

from __future__ import annotations

import pytest

from fae.tasks.answer_checks import answer_problems_light, answer_problems_strict
from fae.tasks.check_spec import read_check

GENES = ["BRCA2", "MLH1", "CFTR", "TP53", "PALB2"]
TERM = {"GENE": {"term": "TP53", "among": GENES}}
SLOT = {"SLOT": {"id": "slot-1"}}
CREATED = {"APPOINTMENT": {"created": "Appointment"}}
SLOTS = {"SLOT_IDS": {"ids": "slot-1, slot-2"}}
VALUE = {"VALUE": {"number": 6.5}}
COUNT = {"COUNT": {"count": 3}}
CHOSEN = {"Appointment": "Appointment/appt-1"}


def _problems(spec, answer, *, light):
    problems = answer_problems_light if light else answer_problems_strict
    return problems(read_check({"answer": spec}).answer, answer, CHOSEN)[0]


def _judged_both_ways(spec, answer):
    return _problems(spec, answer, light=False), _problems(spec, answer, light=True)


@pytest.mark.parametrize(
    "answer",
    [
        "<GENE>No pathogenic variant in TP53</GENE>",
        "<GENE>TP53 was not found</GENE>",
        "<GENE>not TP53</GENE>",
        "<GENE>negative for TP53</GENE>",
        "<GENE>ruled out: TP53</GENE>",
        "<GENE>TP53: negative</GENE>",
        "<GENE>TP53: none</GENE>",
        "<GENE>TP53 wasn't found</GENE>",
        "<GENE>TP53 wasn’t detected</GENE>",
        "<GENE>TP53 wild-type</GENE>",
        "<GENE>Benign variant in TP53</GENE>",
        "<GENE>without pathogenic TP53 variants</GENE>",
        "<GENE>absence of TP53 variants</GENE>",
        "<GENE>TP53 (not found)</GENE>",
        "<GENE>TP53 is not the gene</GENE>",
        "<GENE>neither TP53 nor any other gene</GENE>",
        "<GENE>Pathogenic variant in TP53 excluded</GENE>",
        "<GENE>anything but TP53</GENE>",
        "No pathogenic variant in <GENE>TP53</GENE>.",
        "<GENE>TP53</GENE> was ruled out.",
        "Ruled out: <GENE>TP53</GENE>",
        "I found no variant in <GENE>TP53</GENE>",
        "The report is clear. <GENE>TP53</GENE> is not mutated.",
    ],
)
def test_a_negated_term_fails_strict_and_light(answer):
    strict, light = _judged_both_ways(TERM, answer)
    assert any("negates" in p for p in strict), strict
    assert any("negates" in p for p in light), light


def test_a_term_given_then_negated_is_a_contradiction():
    strict, light = _judged_both_ways(TERM, "<GENE>TP53</GENE> <GENE>not TP53</GENE>")
    assert any("different contents" in p for p in strict) and light == strict


@pytest.mark.parametrize(
    "answer",
    [
        "<GENE>TP53</GENE>",
        "<GENE>Pathogenic variant identified in TP53.</GENE>",
        "<GENE>TP53 (no other variants found)</GENE>",
        "<GENE>TP53; no other pathogenic variants.</GENE>",
        "<GENE>TP53, with no further findings</GENE>",
        "<GENE>Pathogenic TP53 variant, not a VUS</GENE>",
        "<GENE>TP53, not just a variant of uncertain significance</GENE>",
        "<GENE>The final report (not the preliminary one) names TP53.</GENE>",
        "<GENE>No variants of uncertain significance; pathogenic variant in TP53</GENE>",
        "<GENE>All other genes negative except TP53</GENE>",
        "<GENE>No pathogenic variant other than in TP53</GENE>",
        "<GENE>None other than TP53</GENE>",
        "I did not use the preliminary report. The gene is <GENE>TP53</GENE>.",
        "The preliminary report was not final, so the final one counts: <GENE>TP53</GENE>",
        "Not the preliminary report: the final report <REPORT>dr-1</REPORT>, which names <GENE>TP53</GENE>",
        "<GENE>TP53</GENE> (no other genes are named)",
        "<GENE>TP53</GENE> <REPORT>NONE</REPORT>",
    ],
)
def test_negation_words_about_something_else_leave_a_term_passing(answer):
    strict, light = _judged_both_ways(TERM, answer)
    assert strict == [] and light == [], (strict, light)


@pytest.mark.parametrize(
    ("spec", "answer"),
    [
        (SLOT, "<SLOT>not slot-1</SLOT>"),
        (SLOT, "<SLOT>slot-1 was not found</SLOT>"),
        (SLOT, "<SLOT>slot-1 could not be found</SLOT>"),
        (SLOT, "<SLOT>none of slot-1</SLOT>"),
        (SLOT, "<SLOT>slot-1 (missing)</SLOT>"),
        (SLOT, "I could not find <SLOT>slot-1</SLOT>."),
        (SLOT, "<SLOT>slot-1</SLOT> does not exist."),
        (SLOT, "<SLOT>slot-1</SLOT> doesn't exist."),
        (SLOT, "<SLOT>slot-1</SLOT> is not the right one."),
        (SLOT, "<SLOT>slot-1</SLOT> is wrong"),
        (CREATED, "Not <APPOINTMENT>appt-1</APPOINTMENT>"),
        (CREATED, "<APPOINTMENT>appt-1 was not found</APPOINTMENT>"),
        (SLOTS, "<SLOT_IDS>not slot-1, slot-2</SLOT_IDS>"),
        (SLOTS, "None of <SLOT_IDS>slot-1, slot-2</SLOT_IDS>"),
        (VALUE, "<VALUE>not 6.5</VALUE>"),
        (VALUE, "<VALUE>6.5 is not right</VALUE>"),
        (VALUE, "The value is not <VALUE>6.5 %</VALUE>."),
        (COUNT, "<COUNT>not 3</COUNT>"),
        (COUNT, "There are not <COUNT>3</COUNT> slots"),
        (VALUE, "<VALUE>anything but 6.5</VALUE>"),
    ],
)
def test_a_negated_id_or_number_fails_strict_and_light(spec, answer):
    strict, light = _judged_both_ways(spec, answer)
    assert any("negates" in p for p in strict), strict
    assert any("negates" in p for p in light), light


@pytest.mark.parametrize(
    ("spec", "answer"),
    [
        (SLOT, "<SLOT>slot-1</SLOT> is no longer booked."),
        (SLOT, "I cancelled the visit; <SLOT>slot-1</SLOT> is not booked any more."),
        (SLOT, "The slot <SLOT>slot-1</SLOT> is free again (not booked)."),
        (SLOT, "There was no earlier free slot than <SLOT>slot-1</SLOT>."),
        (SLOT, "No free slot before it, so: <SLOT>slot-1</SLOT>"),
        (SLOT, "I didn't find any other free slot: <SLOT>slot-1</SLOT>"),
        (SLOT, "<SLOT>slot-1</SLOT>, not the one at noon"),
        (CREATED, "I did not reuse the waitlist entry; I booked <APPOINTMENT>appt-1</APPOINTMENT>."),
        (CREATED, "<APPOINTMENT>The id is: appt-1.</APPOINTMENT>"),
        (SLOTS, "<SLOT_IDS>slot-1, slot-2</SLOT_IDS> (none in the afternoon)"),
        (SLOTS, "<SLOT_IDS>slot-1, slot-2</SLOT_IDS>; no other free slots"),
        (VALUE, "The latest HbA1c (not the older 7.1 %) is <VALUE>6.5 %</VALUE>"),
        (COUNT, "<COUNT>3</COUNT> (not counting booked slots)"),
        (COUNT, "<COUNT>3</COUNT> free slots, none before noon"),
        (SLOT, "<SLOT>slot-1</SLOT> <COUNT>NONE</COUNT>"),
    ],
)
def test_negation_words_about_something_else_leave_an_id_or_number_passing(spec, answer):
    strict, light = _judged_both_ways(spec, answer)
    assert strict == [] and light == [], (strict, light)


@pytest.mark.parametrize(
    "answer",
    ["<SLOT>NONE</SLOT>", "<SLOT>Not found</SLOT>", "I searched everywhere and found nothing: <SLOT>NONE</SLOT>"],
)
def test_nothing_found_is_no_negated_value(answer):
    assert _problems({"SLOT": {"id": "NONE"}}, answer, light=False) == []
    assert _problems({"SLOT": {"none": True}}, answer, light=False) == []
