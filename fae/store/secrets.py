"""A recording's secret values, scrubbed from every row and body before it is written.

Header and query redaction hides a secret where it was sent; an upstream can
still echo it back (an error "Incorrect API key provided: sk-…", a Bundle's
self link, a tool argument). Every value redacted in a recording, and the
configured API key, joins this set; the writer scrubs each batch with it, in
the raw, URL-encoded and JSON-escaped forms. A cheap substring test runs first,
so a batch with no secret in it is passed through untouched.

fae's own credentials (``fae.util.credentials``: run capabilities, stack keys)
are scrubbed by their shape, whether or not this set has seen them, each to a
placeholder of its own length that keeps its prefix
(``fae-cap-redactedredactedredactedredacted``): it says what stood there, and a
body keeps its size, so a recorded Content-Length and size still agree with it.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import overload
from urllib.parse import quote, quote_plus

from fae.store.bodies import Body, body_slices
from fae.store.log import Batch, FactsRow, RunRow, RunUpdate, VerdictRow, blob_hash
from fae.util.credentials import CREDENTIAL_BYTES, CREDENTIAL_LENGTH, CREDENTIAL_MARK

REDACTED = "[redacted]"
_MARKER = REDACTED.encode()
MIN_LENGTH = 8
"""Shorter values are not scrubbed from bodies: they would match ordinary text (they are still redacted where sent)."""
_CREDENTIAL_MARKER = b"redacted" * 4  # as long as a credential's 32 hex digits, and not hex itself


def _credential(found: re.Match[bytes]) -> bytes:
    return b"fae-" + found.group("kind") + b"-" + _CREDENTIAL_MARKER


def scrub_credentials(data: bytes) -> bytes:
    """The data with every fae credential replaced by its placeholder; the same object when none occurs.

    The recorder runs this before it hashes a body: a capability is in most FHIR replies' links, and a body
    scrubbed only by the writer would be renamed, each rename then sought in every later event.
    """
    if CREDENTIAL_MARK not in data:
        return data
    clean = CREDENTIAL_BYTES.sub(_credential, data)
    return data if clean == data else clean


def _stream_sub(
    pieces: Iterable[bytes | memoryview], pattern: re.Pattern[bytes], keep: int, replace: Callable
) -> Iterator[bytes]:
    """``pattern.sub(replace, ...)`` over a body in pieces, as if it were whole: the last ``keep`` bytes of
    each piece wait for the next one, since a match (at most ``keep + 1`` long) can straddle two."""
    tail = b""
    for piece in pieces:
        text = tail + bytes(piece)
        settled = len(text) - keep  # a match starting before here lies wholly in ``text``
        out, position = [], 0
        for found in pattern.finditer(text):
            if found.start() >= settled:
                break
            out += [text[position : found.start()], replace(found)]
            position = found.end()
        cut = max(position, settled)
        out.append(text[position:cut])
        tail = text[cut:]
        yield b"".join(out)
    yield pattern.sub(replace, tail)


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
        """The pieces of one body with every fae credential and secret form replaced, as if scrubbed whole."""
        forms, pattern = self._compiled()
        clean = _stream_sub(pieces, CREDENTIAL_BYTES, CREDENTIAL_LENGTH - 1, _credential)
        if pattern is None:
            yield from clean
            return
        yield from _stream_sub(clean, pattern, max(len(f) for f in forms) - 1, lambda _: _MARKER)

    def rename(self, old: str, new: str) -> None:
        """A blob's hash that scrubbing changed: events naming the old one are rewritten to the new one."""
        with self._lock:
            self._renamed[old.encode()] = new.encode()

    def found_in(self, body: Body) -> bool:
        """Whether any fae credential or secret form occurs in the body, searched a slice at a time (one may
        straddle two)."""
        forms, pattern = self._compiled()
        patterns = [CREDENTIAL_BYTES, *([pattern] if pattern is not None else [])]
        keep = max([CREDENTIAL_LENGTH, *(len(f) for f in forms)]) - 1
        tail = b""
        for piece in body_slices(body):
            text = tail + bytes(piece)
            if any(p.search(text) for p in patterns):
                return True
            tail = text[len(text) - keep :]
        return False

    def scrub_bytes(self, data: bytes) -> bytes:
        """The data with every fae credential and secret form replaced; the same object when none occurs."""
        clean = scrub_credentials(data)
        forms, pattern = self._compiled()
        if pattern is None or not any(f in clean for f in forms):
            return clean
        return pattern.sub(_MARKER, clean)

    @overload
    def scrub_text(self, text: str) -> str: ...
    @overload
    def scrub_text(self, text: None) -> None: ...
    def scrub_text(self, text: str | None) -> str | None:
        """The text with every secret form and credential replaced; None stays None."""
        if text is None:
            return text
        encoded = text.encode("utf-8", "surrogatepass")
        scrubbed = self.scrub_bytes(encoded)
        return text if scrubbed is encoded else scrubbed.decode("utf-8", "surrogatepass")

    def _scrub_json(self, value: dict) -> dict:
        text = json.dumps(value, sort_keys=True)
        scrubbed = self.scrub_text(text)
        return value if scrubbed == text else json.loads(scrubbed)

    def scrub_batch(self, batch: Batch) -> Batch:
        """The batch with every secret form and credential replaced; blobs that change get new hashes, and events
        follow. A batch with none in it is returned as it is."""
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
        runs = [self._scrub_run(r) for r in batch.runs]
        updates = [self._scrub_update(u) for u in batch.updates]
        verdicts = [self._scrub_verdict(v) for v in batch.verdicts]
        facts = [self._scrub_facts(f) for f in batch.facts]
        same = (
            all(a is b for a, b in zip(blobs.values(), batch.blobs.values(), strict=True))
            and list(blobs) == list(batch.blobs)
            and all(a is b for a, b in zip(events, batch.events, strict=True))
            and all(a is b for a, b in zip(runs, batch.runs, strict=True))
            and all(a is b for a, b in zip(updates, batch.updates, strict=True))
            and all(a is b for a, b in zip(verdicts, batch.verdicts, strict=True))
            and all(a is b for a, b in zip(facts, batch.facts, strict=True))
        )
        if same:
            return batch
        return Batch(
            blobs=blobs,
            runs=runs,
            events=events,
            updates=updates,
            verdicts=verdicts,
            verdict_batches=batch.verdict_batches,
            completed_batches=batch.completed_batches,
            external=batch.external,
            facts=facts,
        )

    def _scrub_run(self, run: RunRow) -> RunRow:
        config = self._scrub_json(run.agent_config)
        return run if config is run.agent_config else replace(run, agent_config=config)

    def _scrub_update(self, update: RunUpdate) -> RunUpdate:
        error, stop_reason = self.scrub_text(update.error), self.scrub_text(update.stop_reason)
        if error is update.error and stop_reason is update.stop_reason:
            return update
        return replace(update, error=error, stop_reason=stop_reason)

    def _scrub_facts(self, found: FactsRow) -> FactsRow:
        """A judge's findings are JSON text: a secret in them is replaced as in any text (where that leaves them
        unreadable, a rejudge finds them again from the events, ``fae.judge.facts``)."""
        text = self.scrub_text(found.facts)
        return found if text is found.facts else replace(found, facts=text)

    def _scrub_verdict(self, verdict: VerdictRow) -> VerdictRow:
        evidence = self._scrub_json(verdict.evidence)
        return verdict if evidence is verdict.evidence else replace(verdict, evidence=evidence)
