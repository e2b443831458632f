"""fae replay: a recorded scripted run re-driven on a fresh in-process sandbox, strict or lenient."""

from __future__ import annotations

import anyio
import pytest
from typer.testing import CliRunner

from fae.cli import app
from fae.errors import ReplayDrift
from fae.harness.redrive import call_key, replay_scripted
from fae.replay.source import load_run
from fae.store.log import EventLog
from fae.tasks.scenarios import scenario_plan

runner = CliRunner()
FIX = "wv-register-patient.v0.scripted-fix"


def _run(log_path, run_id):
    with EventLog(log_path, read_only=True) as log:
        return load_run(log, run_id)


@pytest.mark.parametrize("run_id", [FIX, "sched-book-appointment.v1.gold", "rec-create-patient.v1.gold"])
def test_recorded_runs_replay_identically(replay_log, run_id):
    done = runner.invoke(app, ["replay", run_id, "--log", str(replay_log)])
    assert done.exit_code == 0, done.output
    assert "replayed identically" in done.output


def test_strict_replay_stops_at_the_first_divergence(replay_log):
    run = _run(replay_log, FIX)
    other = scenario_plan("wrong-never-fixed")  # same first call, then answers without fixing
    with pytest.raises(ReplayDrift, match="call 2 .*a missing call|the answer|call 2"):
        anyio.run(lambda: replay_scripted(run, other))
    different = scenario_plan("writes-right")  # the create's body differs
    with pytest.raises(ReplayDrift, match=r"call 1 \(event \d+\): the call differs"):
        anyio.run(lambda: replay_scripted(run, different))


def test_lenient_replay_warns_and_goes_on(replay_log):
    run = _run(replay_log, FIX)
    warned = []
    report = anyio.run(lambda: replay_scripted(run, scenario_plan("writes-right"), strict=False, warn=warned.append))
    assert report.divergences and warned == report.divergences
    assert {d.what for d in report.divergences} >= {"the call", "a missing call"}


def test_the_request_key_ignores_only_volatile_parts():
    body = {"resourceType": "Patient", "meta": {"versionId": "1", "lastUpdated": "2025-01-01T00:00:00Z"}}
    later = {"resourceType": "Patient", "meta": {"versionId": "1", "lastUpdated": "2026-01-01T00:00:00Z"}}
    assert call_key("updateResource", {"body_json": body}) == call_key("updateResource", {"body_json": later})
    bumped = {"resourceType": "Patient", "meta": {"versionId": "2"}}
    assert call_key("updateResource", {"body_json": body}) != call_key("updateResource", {"body_json": bumped})


def test_replay_user_mistakes_are_one_line(replay_log):
    done = runner.invoke(app, ["replay", "no-such-run", "--log", str(replay_log)])
    assert done.exit_code == 1 and "no run 'no-such-run'" in done.output and "Traceback" not in done.output
    # a scripted run replays its own plan: an --agent given for it is refused, not silently ignored
    named = runner.invoke(app, ["replay", FIX, "--log", str(replay_log), "--agent", "gold"])
    assert named.exit_code == 1 and "plays its own plan" in named.output and "Traceback" not in named.output


def test_replay_tells_each_stage_as_it_starts(replay_log):
    """`fae replay` shows these on its progress bar: reading the run, re-driving it, done."""
    from fae.harness.replay_run import replay_run

    told = []
    report = replay_run(replay_log, FIX, on_step=lambda done, total, name: told.append((done, total, name)))
    assert not report.divergences
    assert told == [(0, 3, "reading the run"), (1, 3, "re-driving"), (3, 3, "compared")]
