"""Tolerant answer parsing."""

from __future__ import annotations

import re

import pytest

from fae.tasks import answers


@pytest.mark.parametrize(
    ("text", "tag", "value"),
    [
        ("<PATIENT>pat-1</PATIENT>", "PATIENT", "pat-1"),
        ("<patient> pat-1 \n</Patient>", "PATIENT", "pat-1"),
        ("Use <SLOT>id</SLOT>. Answer: <SLOT>slot-9</SLOT>", "SLOT", "slot-9"),
        ("< SLOT_IDS >a, b</ SLOT_IDS >", "SLOT_IDS", "a, b"),
        ("no tag here", "SLOT", None),
        (None, "SLOT", None),
        # a tag holding only placeholders says nothing (it used to give back its last placeholder)
        ("<SLOT>id</SLOT>", "SLOT", None),
        ("<SLOT_IDS>SLOT_IDS</SLOT_IDS> <SLOT_IDS>slot ids</SLOT_IDS>", "SLOT_IDS", None),
        ("<GENE>…</GENE>", "GENE", None),
        ("<SLOT>[echoed from the prompt: NONE]</SLOT> <SLOT>NONE</SLOT>", "SLOT", "NONE"),
    ],
)
def test_tag_value(text, tag, value):
    assert answers.tag_value(text, tag) == value


def test_placeholders_are_named_as_written():
    said = "<SLOT>id</SLOT> <SLOT>[echoed from the prompt: NONE]</SLOT> <SLOT>SLOT</SLOT>"
    assert answers.placeholders(said, "SLOT") == ["id", "NONE", "SLOT"]
    assert answers.placeholders("<SLOT>slot-1</SLOT>", "SLOT") == []


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        ("slot-1, slot-2", ["slot-1", "slot-2"]),
        ("Slot/slot-1 Slot/slot-2", ["slot-1", "slot-2"]),
        ("slot-1\nslot-2;slot-1", ["slot-1", "slot-2"]),
        ("http://x/fhir/Slot/slot-1/_history/3", ["slot-1"]),
        ('["slot-1", "slot-2"]', ["slot-1", "slot-2"]),
        ("", []),
        # labels are read past, any other word is one more id
        ("The id is: slot-1.", ["slot-1"]),
        ("Appointment appt-1 (the new appointment)", ["appt-1"]),
        ("**slot-1** and slot-2", ["slot-1", "slot-2"]),
        ("slot-1 or slot-2", ["slot-1", "or", "slot-2"]),
        ("not slot-1", ["not", "slot-1"]),
        ("probably slot-1", ["probably", "slot-1"]),
        ("slot-1?", ["slot-1?"]),
    ],
)
def test_id_list(text, ids):
    assert answers.id_list(text) == ids


@pytest.mark.parametrize(
    "text",
    [
        "NONE",
        "none",
        " None. ",
        "Not found",
        "N/A",
        "null",
        "No insurance coverage found",
        "no guarantor found",
        "None found.",
    ],
)
def test_none_words(text):
    assert answers.is_none(text)


@pytest.mark.parametrize("text", ["pat-1", "", "cov-abc123", "nonexistent-1"])
def test_not_none(text):
    assert not answers.is_none(text)


def test_integer():
    assert answers.integer(" 12 ") == 12
    assert answers.integer("12 slots") == 12
    assert answers.integer("12 or 13") is None
    assert answers.integer("twelve") is None


@pytest.mark.parametrize(
    ("text", "value"),
    [
        # identical repeats agree, whatever their written form
        ("<SLOT>slot-1</SLOT> so <SLOT>Slot/slot-1</SLOT>", "Slot/slot-1"),
        ("<SLOT>NONE</SLOT><SLOT>none</SLOT>", "none"),
        # the echoed output contract is a placeholder, not an answer
        ("Reply as <SLOT>new slot id</SLOT>: <SLOT>slot-2</SLOT>", "slot-2"),
        ("<COUNT>n</COUNT> <COUNT>4</COUNT>", "4"),
    ],
)
def test_repeats_that_agree_pass(text, value):
    tag = re.search(r"<([A-Z_]+)>", text).group(1)
    assert answers.tag_value(text, tag) == value


@pytest.mark.parametrize(
    "text",
    [
        "<SURGERY_PLAN>sr-1a2b3c</SURGERY_PLAN> or maybe <SURGERY_PLAN>NONE</SURGERY_PLAN>",
        "<SURGERY_PLAN>NONE</SURGERY_PLAN> <SURGERY_PLAN>sr-1a2b3c</SURGERY_PLAN>",
        "<SURGERY_PLAN>sr-1a2b3c</SURGERY_PLAN><SURGERY_PLAN>sr-ffffff</SURGERY_PLAN>",
    ],
)
def test_contradictory_repeats_are_refused(text):
    with pytest.raises(answers.Contradiction):
        answers.tag_value(text, "SURGERY_PLAN")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("6.5", "6.5"),
        ("6.5 %", "6.5"),
        ("6.5%", "6.5"),
        ("HbA1c 7.0 percent", "7.0"),
        ("7", "7"),
        ("-1.25", "-1.25"),
    ],
)
def test_number(text, value):
    assert str(answers.number(text)) == value


@pytest.mark.parametrize(
    "text", ["", "six", "6.5 or 6.6", "5.6, 6.5", "1.2.3", None, "6.5 % (48 mmol/mol)", "48 mmol/mol (6.5 %)"]
)
def test_no_single_number(text):
    assert answers.number(text) is None


def test_terms_name_vocabulary_words_only():
    genes = ["BRCA2", "MLH1", "CFTR", "TP53", "PALB2"]
    assert answers.terms("Pathogenic variant identified in CFTR.", genes) == ["CFTR"]
    assert answers.terms("BRCA2, MLH1, CFTR, TP53, PALB2", genes) == genes
    assert answers.terms("cftr", genes) == ["CFTR"]
    assert answers.terms("CFTRX", genes) == []


def test_term_spans_say_where_each_term_is_named():
    text = "No BRCA2 variant; pathogenic variant in tp53."
    assert answers.term_spans(text, ["BRCA2", "TP53"]) == [(3, 8, "BRCA2"), (40, 44, "TP53")]
