"""A recording's secret values, scrubbed from every row and body before it is written.

Header and query redaction hides a secret where it was sent; an upstream can
still echo it back (an error "Incorrect API key provided: sk-…", a Bundle's
self link, a tool argument). Every value redacted in a recording, and the
configured API key, joins this set; the writer scrubs each batch with it, in
the raw, URL-encoded and JSON-escaped forms. A cheap substring test runs first,
so a batch with no secret in it is passed through untouched.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import overload
from urllib.parse import quote, quote_plus

from fae.store.bodies import Body, body_slices
from fae.store.log import Batch, blob_hash

REDACTED = "[redacted]"
MIN_LENGTH = 8
"""Shorter values are not scrubbed from bodies: they would match ordinary text (they are still redacted where sent)."""


def _forms(value: str) -> set[str]:
    escaped = {json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]}
    return {
        value,
        quote(value, safe=""),
        quote(value),
        quote_plus(value),
        *escaped,
        *(form.replace("/", "\\/") for form in escaped),
    }  # some encoders also escape "/"


class SecretValues:
    """The set of secret strings seen so far; thread-safe to add to and to scrub with."""

    def __init__(self, values: tuple[str, ...] | list[str] = ()):
        self._lock = threading.Lock()
        self._forms: set[bytes] = set()
        self._pattern: re.Pattern[bytes] | None = None
        self._renamed: dict[bytes, bytes] = {}  # blob hashes that scrubbing changed, for later references too
        for value in values:
            self.add(value)

    def __bool__(self) -> bool:
        return bool(self._forms)

    def __len__(self) -> int:
        return len(self._forms)

    def add(self, value: str | None) -> None:
        """Remember a secret value (and its encoded forms); too-short values and the marker are ignored."""
        if not value:
            return
        value = value.strip()
        if len(value) < MIN_LENGTH or value == REDACTED:
            return
        forms = {f.encode() for f in _forms(value) if len(f) >= MIN_LENGTH}
        with self._lock:
            if not forms <= self._forms:
                self._forms |= forms
                self._pattern = None

    def _compiled(self) -> tuple[frozenset[bytes], re.Pattern[bytes] | None]:
        with self._lock:
            if self._pattern is None and self._forms:
                ordered = sorted(self._forms, key=len, reverse=True)  # longest first: no half-scrubbed form
                self._pattern = re.compile(b"|".join(re.escape(f) for f in ordered))
            return frozenset(self._forms), self._pattern

    def scrub_stream(self, pieces: Iterable[bytes | memoryview]) -> Iterator[bytes | memoryview]:
        """The pieces of one body with every secret form replaced, as if scrubbed whole; uncopied when none is known.

        The last ``longest form - 1`` bytes of each piece wait for the next one: a form can straddle pieces.
        """
        forms, pattern = self._compiled()
        if pattern is None:
            yield from pieces
            return
        keep = max(len(f) for f in forms) - 1
        tail = b""
        marker = REDACTED.encode()
        for piece in pieces:
            text = tail + bytes(piece)
            settled = len(text) - keep  # a form starting before here lies wholly in ``text``
            out, position = [], 0
            for found in pattern.finditer(text):
                if found.start() >= settled:
                    break
                out += [text[position : found.start()], marker]
                position = found.end()
            cut = max(position, settled)
            out.append(text[position:cut])
            tail = text[cut:]
            yield b"".join(out)
        yield pattern.sub(marker, tail)

    def rename(self, old: str, new: str) -> None:
        """A blob's hash that scrubbing changed: events naming the old one are rewritten to the new one."""
        with self._lock:
            self._renamed[old.encode()] = new.encode()

    def found_in(self, body: Body) -> bool:
        """Whether any secret form occurs in the body, searched a slice at a time (a form may straddle two)."""
        forms, pattern = self._compiled()
        if pattern is None:
            return False
        keep = max(len(f) for f in forms) - 1
        tail = b""
        for piece in body_slices(body):
            text = tail + bytes(piece)
            if pattern.search(text):
                return True
            tail = text[len(text) - keep :] if keep else b""
        return False

    def scrub_bytes(self, data: bytes) -> bytes:
        forms, pattern = self._compiled()
        if pattern is None or not any(f in data for f in forms):
            return data
        return pattern.sub(REDACTED.encode(), data)

    @overload
    def scrub_text(self, text: str) -> str: ...
    @overload
    def scrub_text(self, text: None) -> None: ...
    def scrub_text(self, text: str | None) -> str | None:
        """The text with every secret form replaced; None stays None."""
        if text is None or not self:
            return text
        scrubbed = self.scrub_bytes(text.encode("utf-8", "surrogatepass"))
        return scrubbed.decode("utf-8", "surrogatepass")

    def _scrub_json(self, value: dict) -> dict:
        text = json.dumps(value, sort_keys=True)
        scrubbed = self.scrub_text(text)
        return value if scrubbed == text else json.loads(scrubbed)

    def scrub_batch(self, batch: Batch) -> Batch:
        """The batch with every secret form replaced; blobs that change get new hashes, and events follow."""
        if not self:
            return batch
        blobs: dict[str, bytes] = {}
        renamed = self._renamed
        for digest, data in batch.blobs.items():
            clean = self.scrub_bytes(data)
            if clean is data:
                blobs[digest] = data
            else:
                new = blob_hash(clean)
                blobs[new] = clean
                renamed[digest.encode()] = new.encode()
        events = []
        for row in batch.events:
            payload = self.scrub_bytes(row.payload)
            for old_hash, new_hash in list(renamed.items()):
                if old_hash in payload:
                    payload = payload.replace(old_hash, new_hash)
            events.append(row if payload is row.payload else replace(row, payload=payload))
        return Batch(
            blobs=blobs,
            runs=[replace(r, agent_config=self._scrub_json(r.agent_config)) for r in batch.runs],
            events=events,
            updates=[
                replace(u, error=self.scrub_text(u.error), stop_reason=self.scrub_text(u.stop_reason))
                for u in batch.updates
            ],
            verdicts=[replace(v, evidence=self._scrub_json(v.evidence)) for v in batch.verdicts],
            external=batch.external,
        )
