"""What storing ensure_record's rule-free inputs would buy a one-rule rejudge: measured, not built.

A one-rule rejudge (``fae rejudge --rule accept_corrections=false``, the other judges' verdicts standing) loads
each run, folds it, rebuilds the proxy trail, the window, the record's versions, the record at the check, the
same-identity records and the server-vs-fold differences, and only then applies the three rules in ``verify()``.
None of those inputs depends on a rule. This benchmark measures, on a grown log (bench/bench_rejudge.py
``--keep``), side by side in one process:

  derive   load every run (the streaming loader a rejudge uses) and judge ensure_record under the new rules
  stored   decode each run's stored inputs (msgspec-encoded, one blob a run, as a log table would hold them)
           and run ``verify()`` under the new rules

and checks that both give the same verdicts. The inputs are captured by judging every run once under both
settings of ``accept_corrections`` with ``verify``'s lookups (``versions``, ``final``) recorded, so the stored
form answers every lookup either rule set makes. It prints CPU µs a run for each, the ratio, runs per CPU-second,
and the stored bytes a run. The stored form covers runs whose verdict comes from ``verify()`` under the proxy
evidence; runs whose verdict is decided before it (no target, unreadable fold) would store their verdict.

    uv run python bench/bench_verify_facts.py LOG [--runs N]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

import msgspec
import msgspec.structs

import fae.judge.builtin_judges  # noqa: F401  (registers the judges)
import fae.judge.ensure_record as ensure_record
from fae.judge.context import RunContext
from fae.judge.judging import judges_to_run
from fae.judge.registry import Verdict
from fae.judge.trail import Trail
from fae.judge.verify import RecordVersion, Window, verify
from fae.replay.source import load_runs, run_ids
from fae.store.log import EventLog
from fae.tasks.write_targets import WriteTarget

NEW = {"accept_corrections": False}


class Lookups:
    """``verify``'s two lookups, answered by the fold and remembered (capture) or answered from memory (replay)."""

    def __init__(self, versions: Callable[[str], list[RecordVersion]] | None, final: Callable[..., Any] | None):
        self._versions, self._final = versions, final
        self.versions_seen: dict[str, list[RecordVersion]] = {}
        self.final_seen: dict[str, Any] = {}

    def versions(self, ref: str) -> list[RecordVersion]:
        if self._versions is not None and ref not in self.versions_seen:
            self.versions_seen[ref] = list(self._versions(ref))
        return self.versions_seen[ref]

    def final(self, kind: str, rid: str) -> Any:
        key = f"{kind}/{rid}"
        if self._final is not None and key not in self.final_seen:
            self.final_seen[key] = self._final(kind, rid)
        return self.final_seen[key]


def compact(trail: Trail) -> Trail:
    """The trail verify() reads: every write, and the reads of a record some write touched (the record under check
    is always one of those where a read of it matters); the other reads (searches of the seed) are left out."""
    written = {a.ref for a in trail.accesses if a.kind == "write"}
    kept = tuple(a for a in trail.accesses if a.kind == "write" or a.ref in written)
    return msgspec.structs.replace(trail, accesses=kept)


def capture(log: EventLog, ids: list[str]) -> tuple[dict[str, bytes], dict[str, Any]]:
    """Each run's verify() calls under both rule sets, encoded; and the derive path's verdicts under NEW."""
    stored: dict[str, list[dict[str, Any]]] = {}
    calls: list[dict[str, Any]] = []

    def recording_verify(target, trail, window, versions, final, same_type, rules, record=None, allowed=(), server=()):
        lookups = Lookups(versions, final)
        for accept in (True, False):
            verify(
                target,
                trail,
                window,
                lookups.versions,
                lookups.final,
                same_type,
                {**rules, "accept_corrections": accept},
                record,
                allowed,
                server,
            )
        calls.append(
            {
                "target": target,
                "trail": compact(trail),
                "window": window,
                "versions": lookups.versions_seen,
                "final": lookups.final_seen,
                "same_type": same_type,
                "rules": dict(rules),
                "record": record,
                "allowed": list(allowed),
                "server": list(server),
            }
        )
        return verify(target, trail, window, versions, final, same_type, rules, record, allowed, server)

    ensure_record.verify = recording_verify  # the bench's own capture: the judge module calls verify by this name
    try:
        [judging] = judges_to_run("ensure_record", NEW)
        expected = {}
        for run in load_runs(log, ids, lean=True):
            calls.clear()
            expected[run.run_id] = judging.fn(RunContext(run))
            stored[run.run_id] = list(calls)
    finally:
        ensure_record.verify = verify
    encoder = msgspec.msgpack.Encoder()
    return {run_id: encoder.encode(found) for run_id, found in stored.items()}, expected


class VerifyInput(msgspec.Struct):
    """One target's verify() inputs as a log would store them: every field is rule-free but ``rules``."""

    target: WriteTarget
    trail: Trail
    window: Window
    versions: dict[str, list[RecordVersion]]
    final: dict[str, Any]
    same_type: list[dict[str, Any]]
    rules: dict[str, Any]
    record: str | None
    allowed: list[str]
    server: list[dict[str, Any]]


def judge_stored(blob: bytes, decode: Callable[[bytes], list[VerifyInput]], rules: dict[str, Any]) -> list[Verdict]:
    """verify() under ``rules`` over one run's stored inputs (each target's)."""
    verdicts = []
    for call in decode(blob):
        lookups = Lookups(None, None)
        lookups.versions_seen, lookups.final_seen = call.versions, call.final
        verdicts.append(
            verify(
                call.target,
                call.trail,
                call.window,
                lookups.versions,
                lookups.final,
                call.same_type,
                {**call.rules, **rules},
                call.record,
                call.allowed,
                call.server,
            )
        )
    return verdicts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("log")
    parser.add_argument("--runs", type=int, default=0, help="at most this many runs (0: all)")
    args = parser.parse_args()
    with EventLog(args.log, read_only=True) as log:
        ids = run_ids(log)
        if args.runs:
            ids = ids[: args.runs]
        blobs, expected = capture(log, ids)
        [judging] = judges_to_run("ensure_record", NEW)
        start = time.process_time()
        derived = {run.run_id: judging.fn(RunContext(run)) for run in load_runs(log, ids, lean=True)}
        derive_s = time.process_time() - start
    decoder = msgspec.msgpack.Decoder(list[VerifyInput])
    start = time.process_time()
    from_stored = {run_id: judge_stored(blob, decoder.decode, NEW) for run_id, blob in blobs.items()}
    stored_s = time.process_time() - start
    same = 0
    single = 0
    for run_id, verdict in derived.items():
        found = from_stored.get(run_id) or []
        if len(found) == 1:
            single += 1
            mine = found[0]
            if (mine.outcome, mine.passed, json.dumps(mine.evidence, sort_keys=True, default=str)) == (
                verdict.outcome,
                verdict.passed,
                json.dumps(verdict.evidence, sort_keys=True, default=str),
            ):
                same += 1
    runs = len(ids)
    size = sum(len(b) for b in blobs.values())
    print(f"{runs} runs, {single} judged by one verify() call; stored verdict identical for {same} of them")
    print(f"derive: {derive_s / runs * 1e6:,.0f} CPU-µs a run ({runs / derive_s:,.0f} runs per CPU-second)")
    print(f"stored: {stored_s / runs * 1e6:,.0f} CPU-µs a run ({runs / stored_s:,.0f} runs per CPU-second)")
    print(f"ratio {derive_s / stored_s:.1f}x; stored inputs {size / runs:,.0f} bytes a run (msgpack)")
    parts: dict[str, int] = {}
    for blob in blobs.values():
        for call in decoder.decode(blob):
            for name in VerifyInput.__struct_fields__:
                parts[name] = parts.get(name, 0) + len(msgspec.msgpack.encode(getattr(call, name)))
    by_size = sorted(parts.items(), key=lambda item: -item[1])
    print("bytes a run by field: " + ", ".join(f"{name} {size / runs:,.0f}" for name, size in by_size))


if __name__ == "__main__":
    main()
