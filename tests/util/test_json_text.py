"""json_or_text: text holding JSON is decoded, anything else is kept as it is."""

from __future__ import annotations

import pytest

from fae.util.json_text import json_or_text


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('{"resourceType": "Patient", "id": "p1"}', {"resourceType": "Patient", "id": "p1"}),
        ("[1, 2]", [1, 2]),
        ("true", True),
        ("7", 7),
        ('"quoted"', "quoted"),
    ],
)
def test_text_holding_json_is_decoded(value, expected):
    assert json_or_text(value) == expected


@pytest.mark.parametrize("value", ["plain words", '{"cut": ', "", "NaNx", {"a": 1}, [1], 5, None])
def test_text_that_is_not_json_and_values_not_text_are_kept_as_they_are(value):
    assert json_or_text(value) is value
