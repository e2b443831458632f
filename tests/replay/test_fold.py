"""Folding recorded runs into FHIR state: at any event, searchable offline, and checked against the capture."""

from __future__ import annotations

import json
import shutil

import duckdb
from msgspec.structs import replace

from fae.judge.context import RunContext
from fae.replay import captured_resources, fold_state, fold_transcript, load_run, state_drift
from fae.replay.drift import capture_seq
from fae.replay.fold import fhir_exchanges, folds_after
from fae.store.events import SandboxSeeded
from fae.store.log import EventLog

BOOK = "sched-book-appointment.v1.gold"


def _run(log_path, run_id):
    with EventLog(log_path, read_only=True) as log:
        return load_run(log, run_id)


def test_fold_matches_the_capture_of_every_recorded_run(replay_log):
    with EventLog(replay_log, read_only=True) as log:
        _, rows = log.query("SELECT run_id FROM runs WHERE run_id NOT LIKE '%unrecorded%'")
        for (run_id,) in rows:
            run = load_run(log, run_id)
            seq, captured = captured_resources(run)
            state = fold_state(run, seq)
            assert state_drift(state, captured) == [], run_id
            assert not state.problems
            assert len(state.all()) == len(captured)


def test_fold_at_any_event_and_version_history(replay_log):
    run = _run(replay_log, BOOK)
    writes = [x for x in fhir_exchanges(run) if x.interaction in ("create", "update") and x.actor == "agent"]
    create, update = writes
    before = fold_state(run, create.seq - 1)
    after = fold_state(run, create.seq)
    assert before.read("Appointment", create.resource_id) is None
    assert after.read("Appointment", create.resource_id)["status"] == "booked"
    slot = update.resource_id
    assert after.read("Slot", slot)["status"] == "free"
    final = fold_state(run)
    assert final.read("Slot", slot)["status"] == "busy"
    history = final.versions("Slot", slot)
    assert [(v.version_id, v.actor, v.seq) for v in history] == [("1", None, None), ("2", "agent", update.seq)]
    # the seed view stays the seed
    assert final.seed.read("Slot", slot)["status"] == "free"


def test_folded_state_searches_with_the_server_semantics(replay_log):
    run = _run(replay_log, BOOK)
    create = next(x for x in fhir_exchanges(run) if x.interaction == "create")
    final = fold_state(run)
    booked = final.search("Appointment", "status=booked")
    assert create.resource_id in [r["id"] for r in booked]
    assert create.resource_id not in [r["id"] for r in fold_state(run, create.seq - 1).search("Appointment")]
    busy = final.search("Slot", "status=busy")
    assert len(busy) == len([r for r in final.resources("Slot") if r["status"] == "busy"]) >= 1


def test_a_delete_and_a_recreate_fold_into_versions(replay_log):
    run = _run(replay_log, "wv-register-patient.v0.delete-then-recreate")
    final = fold_state(run)
    created = next(x for x in fhir_exchanges(run) if x.interaction == "create")
    versions = final.versions("Patient", created.resource_id)
    assert [v.version_id for v in versions] == ["1", "2", "3"]
    assert versions[1].resource is None and versions[2].resource is not None
    assert final.read("Patient", created.resource_id) is not None


def test_a_write_that_bypassed_the_proxy_shows_as_drift(replay_log):
    run = _run(replay_log, "wv-register-patient.v0.unrecorded-write-behind-fix")
    seq, captured = captured_resources(run)
    drift = state_drift(fold_state(run, seq), captured)
    created = next(x for x in fhir_exchanges(run) if x.interaction == "create")
    assert drift == [
        {
            "ref": f"Patient/{created.resource_id}",
            "difference": "content",
            "elements": ["active"],
            "fold_version": "2",
            "capture_version": "3",
        }
    ]


def test_a_write_missing_from_the_log_shows_as_drift(replay_log, tmp_path):
    copy = tmp_path / "cut.duckdb"
    shutil.copy(replay_log, copy)
    run = _run(replay_log, BOOK)
    update = next(x for x in fhir_exchanges(run) if x.interaction == "update")
    con = duckdb.connect(str(copy))
    con.execute("DELETE FROM events WHERE run_id = ? AND seq = ?", [BOOK, update.seq])
    con.close()
    cut = _run(copy, BOOK)
    seq, captured = captured_resources(cut)
    drift = state_drift(fold_state(cut, seq), captured)
    assert [d["ref"] for d in drift] == [f"Slot/{update.resource_id}"]
    assert drift[0]["elements"] == ["status"]


def test_the_transcript_folds_tool_calls_and_answer(replay_log):
    transcript = fold_transcript(_run(replay_log, "wv-register-patient.v0.scripted-fix"))
    assert [c.tool for c in transcript.tool_calls] == ["createResource", "getResourceById", "updateResource"]
    assert transcript.answer.startswith("<PATIENT>") and transcript.stop_reason == "answered"
    assert not any(c.is_error for c in transcript.tool_calls)


def test_folds_of_one_seed_share_it_but_never_each_others_writes(replay_log):
    with EventLog(replay_log, read_only=True) as log:
        _, rows = log.query("SELECT run_id FROM runs ORDER BY run_id")
        runs = [load_run(log, run_id) for (run_id,) in rows]
    by_seed: dict[str, list] = {}
    for run in runs:
        seeded = run.first(SandboxSeeded)
        if seeded is not None:
            by_seed.setdefault(seeded.event.seed_blob, []).append(run)
    checked = 0
    for group in by_seed.values():
        folds = [fold_state(run) for run in group]  # folded one after another, sharing the seed's snapshot
        for state in folds:
            untouched = {(r["resourceType"], r["id"]) for r in state.seed_resources} - set(state.history)
            for other in folds:
                for key in set(other.history) - set(state.history):
                    checked += 1
                    assert state.read(*key) is (state.seed.read(*key) if key in untouched else None)
            assert state.seed.all() == sorted(state.seed_resources, key=lambda r: (r["resourceType"], r["id"]))
    assert checked  # some runs of one seed wrote what the others did not


def test_the_fold_after_the_last_event_is_folded_again_only_when_something_after_the_capture_can_change_it(replay_log):
    run = _run(replay_log, BOOK)
    captured = capture_seq(run)
    exchanges = fhir_exchanges(run)
    assert not folds_after(exchanges, captured)  # the gold run's verifier only reads after the capture
    context = RunContext(run)
    assert context.full_fold is context.fold
    later = captured + 1000
    write = next(x for x in exchanges if x.interaction == "create")
    read = next(x for x in exchanges if x.interaction == "read" or x.interaction.startswith("search"))
    assert folds_after([*exchanges, replace(write, seq=later)], captured)
    assert folds_after([*exchanges, replace(write, seq=later, status=500)], captured)  # refused: still refolded
    assert folds_after(
        [*exchanges, replace(write, seq=later, interaction="sandbox-admin", path="/sandbox/s/$reset", status=200)],
        captured,
    )
    assert not folds_after([*exchanges, replace(read, seq=later)], captured)


def test_a_log_cycling_through_many_seeds_parses_each_once():
    """A study of 49 tasks with 10 variations has 490 seeds, and its suites take turns through them: each seed is
    parsed once, not once a run (a cache smaller than the variations misses on every run)."""
    from fae.replay.fold import _SEEDS, SEEDS_KEPT, _seed_of
    from fae.replay.source import Recorded, RunLog
    from fae.tasks.suite import rendered_task

    count = 490
    assert SEEDS_KEPT >= rendered_task.cache_info().maxsize >= count  # the caches keep as many variations
    bodies = {
        f"seed-{i}": json.dumps(
            {
                "resourceType": "Bundle",
                "type": "transaction",
                "entry": [{"resource": {"resourceType": "Patient", "id": f"p{i}"}}],
            }
        ).encode()
        for i in range(count)
    }
    runs = [
        (
            RunLog(
                run_id=f"r{i}",
                task_id="t",
                variation=i,
                agent="a",
                repeat=0,
                status="finished",
                events=[],
                _bodies=bodies,
            ),  # a dict has the one method a run's bodies need: get(hash)
            Recorded(1, 0, 0, "harness", None, SandboxSeeded("s", "http://x", 1, f"seed-{i}")),
        )
        for i in range(count)
    ]
    try:
        first = [_seed_of(run, seeded) for run, seeded in runs]
        again = [_seed_of(run, seeded) for run, seeded in runs]  # the next suite, in the same order
    finally:
        for digest in bodies:
            _SEEDS.pop(digest, None)
    assert all(a is b for a, b in zip(first, again, strict=True))
    assert [resources[0]["id"] for resources, _ in again] == [f"p{i}" for i in range(count)]
