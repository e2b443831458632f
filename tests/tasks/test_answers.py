"""Tolerant answer parsing."""

from __future__ import annotations

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
    ],
)
def test_tag_value(text, tag, value):
    assert answers.tag_value(text, tag) == value


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        ("slot-1, slot-2", ["slot-1", "slot-2"]),
        ("Slot/slot-1 Slot/slot-2", ["slot-1", "slot-2"]),
        ("slot-1\nslot-2;slot-1", ["slot-1", "slot-2"]),
        ("http://x/fhir/Slot/slot-1/_history/3", ["slot-1"]),
        ('["slot-1", "slot-2"]', ["slot-1", "slot-2"]),
        ("", []),
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
