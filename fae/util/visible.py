"""Text from a log, an agent or an upstream made safe to show: every character that could act, not be read, escaped.

A value recorded by fae was written by whoever controls the agent, the upstream or the log file. Shown as it
is, an ESC starts a terminal control sequence (retitle the window, clear the screen, write the clipboard, a
hidden link), a C1 byte does the same on terminals that take 8-bit controls, a carriage return overwrites
the line, and a bidi override or another invisible format character makes the text read as something it is
not. ``visible`` replaces each such character by its escape, written the way JSON writes it (``\\u001b``;
past the first plane as JSON's surrogate pair, ``\\udb40\\udc01``), so the value shown is the value stored,
with the dangerous characters spelled out. Newline and tab are kept; a backslash is shown as it is.
"""

from __future__ import annotations

import unicodedata

KEPT = frozenset("\t\n")
"""Control characters that lay text out and are shown as they are."""

HIDDEN_CATEGORIES = frozenset(("Cc", "Cf", "Cs", "Zl", "Zp"))
"""C0, DEL and C1 controls; format characters (bidi overrides and isolates, zero-width, tags, soft hyphen);
lone surrogates; the line and paragraph separators."""


def hidden(char: str) -> bool:
    """Whether ``char`` is escaped by ``visible``."""
    return char not in KEPT and unicodedata.category(char) in HIDDEN_CATEGORIES


def escape(char: str) -> str:
    """``char`` as JSON escapes it: ``\\u`` and four hex digits, a surrogate pair past U+FFFF."""
    code = ord(char)
    if code > 0xFFFF:
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def visible(text: str) -> str:
    """``text`` with every hidden character (see ``hidden``) replaced by its escape."""
    if text.isprintable():  # no control, format or separator character at all: the common case, in C
        return text
    return "".join(escape(char) if hidden(char) else char for char in text)
