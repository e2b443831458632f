"""Every character that could act on a terminal or spoof text is shown as its JSON escape; every other one as is."""

from __future__ import annotations

import json
import sys
import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from fae.util.visible import hidden, visible

ACTING = {
    "\x00": "\\u0000",
    "\x07": "\\u0007",  # BEL, ends an OSC sequence
    "\x08": "\\u0008",
    "\r": "\\u000d",  # overwrites the line
    "\x1b": "\\u001b",  # ESC: CSI, OSC 0 title, OSC 8 link, OSC 52 clipboard
    "\x7f": "\\u007f",
    "\x85": "\\u0085",  # C1 NEL
    "\x9b": "\\u009b",  # C1 CSI on 8-bit terminals
    "\x9d": "\\u009d",  # C1 OSC
    "\u00ad": "\\u00ad",  # soft hyphen
    "\u061c": "\\u061c",  # Arabic letter mark
    "\u200b": "\\u200b",  # zero width space
    "\u200d": "\\u200d",  # zero width joiner
    "\u200e": "\\u200e",  # left-to-right mark
    "\u202e": "\\u202e",  # right-to-left override
    "\u2066": "\\u2066",  # left-to-right isolate
    "\u2069": "\\u2069",  # pop directional isolate
    "\u2028": "\\u2028",  # line separator
    "\u2029": "\\u2029",  # paragraph separator
    "\ufeff": "\\ufeff",  # zero width no-break space
    "\U000e0041": "\\udb40\\udc41",  # tag latin capital A: invisible
    "\ud800": "\\ud800",  # a lone surrogate (json.loads makes one from a log's "\ud800")
}

SHOWN = ["a", " ", "\t", "\n", "\\", "[", "$", "é", "中", "😀", "\u0301", "\u00a0", "\u3000", "\ue000"]


def test_each_acting_character_is_its_json_escape():
    for char, escape in ACTING.items():
        assert hidden(char), repr(char)
        assert visible(f"a{char}b") == f"a{escape}b", repr(char)


def test_text_layout_and_readable_characters_are_kept():
    for char in SHOWN:
        assert not hidden(char), repr(char)
        assert visible(f"a{char}b") == f"a{char}b", repr(char)


def test_every_code_point_is_either_kept_or_escaped_back_to_itself():
    """Over all of Unicode: a hidden character is a control, format, surrogate or separator, and its escape is
    JSON's, which reads back as the character; every other character is left alone."""
    for code in range(sys.maxunicode + 1):
        char = chr(code)
        if hidden(char):
            assert unicodedata.category(char) in ("Cc", "Cf", "Cs", "Zl", "Zp") and char not in "\t\n"
            shown = visible(char)
            assert shown.isascii() and shown.isprintable(), hex(code)
            assert json.loads(f'"{shown}"') == char, hex(code)
        else:
            assert visible(char) == char, hex(code)


@given(st.text(alphabet=st.characters(codec=None, exclude_categories=())))
def test_what_is_shown_holds_no_hidden_character_and_reads_back(text):
    shown = visible(text)
    assert not any(hidden(char) for char in shown)
    assert visible(shown) == shown  # escaping twice changes nothing: a layer may escape what another did
    if "\\" not in text and '"' not in text:
        assert json.loads(f'"{shown}"'.replace("\n", "\\n").replace("\t", "\\t")) == text
