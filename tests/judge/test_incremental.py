"""An incremental rejudge leaves what would come out the same standing, and ends with a full rejudge's verdicts."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fae.judge.compare import compare
from fae.judge.rejudge import rejudge
from fae.store.log import EventLog

CHANGES = [
    ("every default judge, nothing changed", None, {}),
    ("ensure_record accept_corrections=false", "ensure_record", {"accept_corrections": False}),
    ("ensure_record settle_s=2.5", "ensure_record", {"settle_s": 2.5}),
    ("ensure_record evidence=trail", "ensure_record", {"evidence": "trail"}),
    ("state_drift ignores nothing", "state_drift", {"ignore_types": []}),
    ("task light", "task", {"mode": "light"}),
    ("ensure_record accept_corrections=false again", "ensure_record", {"accept_corrections": False}),
    ("every default judge again", None, {}),
]
"""Every rule the default judges take, changed one at a time, then back to ones judged before."""


def _latest(log: Path) -> dict[tuple[str, str, str], tuple]:
    """Each (run, judge, rule set)'s latest verdict, without when or in which batch it was judged."""
    with EventLog(log, read_only=True) as opened:
        _, rows = opened.query(
            "SELECT run_id, judge, rule_set_hash, outcome, passed, CAST(evidence AS VARCHAR), code_version"
            " FROM latest_verdicts"
        )
    return {(run, judge, digest): rest for run, judge, digest, *rest in rows}


def _written(log: Path, batch: str) -> int:
    with EventLog(log, read_only=True) as opened:
        _, rows = opened.query("SELECT count(*) FROM verdicts WHERE batch = ?", [batch])
    return rows[0][0]


@pytest.mark.parametrize(("which", "changes"), [("scenario_log", CHANGES), ("suite_log", CHANGES[:2])])
def test_every_rule_change_ends_with_a_full_rejudge_s_latest_verdicts(which, changes, request, tmp_path):
    """Every change on the scenarios' log; on the suite's (every task), nothing changed and one ensure_record rule."""
    source = request.getfixturevalue(which)
    source = source[0] if isinstance(source, tuple) else source
    incremental, full = tmp_path / "incremental.duckdb", tmp_path / "full.duckdb"
    shutil.copy(source, incremental)
    shutil.copy(source, full)
    assert _latest(incremental) == _latest(full)
    for said, judge, rules in changes:
        fast = rejudge(incremental, judge_name=judge, overrides=rules, workers=1)
        slow = rejudge(full, judge_name=judge, overrides=rules, workers=1, full=True)
        assert _latest(incremental) == _latest(full), said
        # what the incremental one judged is what had no verdict under these rules; the rest stood
        assert fast.runs <= slow.runs and fast.outcomes == slow.outcomes, said
        assert sum(fast.stood.values()) + _written(incremental, fast.batch) == _written(full, slow.batch), said
        if said.endswith(("nothing changed", "again")) or judge == "task":
            assert _written(incremental, fast.batch) == 0 and fast.runs == 0, said  # rules judged before: all stand
        else:
            assert _written(incremental, fast.batch) > 0, said


def test_a_verdict_of_another_code_version_or_of_today_s_task_files_is_judged_again(scenario_log, tmp_path):
    log = tmp_path / "log.duckdb"
    shutil.copy(scenario_log, log)
    assert rejudge(log, workers=1).runs == 0  # the live verdicts stand
    with EventLog(log) as opened:
        opened.con.execute("UPDATE verdicts SET code_version = 'an-older-fae' WHERE judge = 'oracle'")
    again = rejudge(log, workers=1)
    oracle = {key: n for key, n in again.stood.items() if key[0] == "oracle"}
    assert again.runs > 0 and set(oracle.values()) == {0}, again.stood  # only the oracle's verdicts were old
    assert all(n > 0 for (name, _), n in again.stood.items() if name != "oracle"), again.stood
    current = rejudge(log, judge_name="ensure_record", overrides={"settle_s": 3.0}, workers=1, tasks="current")
    assert current.runs > 0
    # a verdict judged against today's task files does not stand for a rejudge against the log's tasks
    kept = rejudge(log, judge_name="ensure_record", overrides={"settle_s": 3.0}, workers=1)
    assert kept.runs == current.runs and sum(kept.stood.values()) == 0, kept.stood
    with EventLog(log, read_only=True) as opened:
        _, batches = opened.query(
            "SELECT judges->>'$[0].tasks', CAST(judges->>'$[0].stood' AS INTEGER) FROM verdict_batches WHERE batch = ?",
            [kept.batch],
        )
    assert batches == [("log", 0)]


def test_compare_takes_stored_verdicts_on_the_terms_rejudge_does(scenario_log, tmp_path):
    """A verdict judged against today's task files is judged again by compare as by rejudge; a live one is used."""
    log = tmp_path / "log.duckdb"
    shutil.copy(scenario_log, log)
    current = rejudge(log, judge_name="ensure_record", overrides={"settle_s": 3.0}, workers=1, tasks="current")
    assert current.runs > 0
    with EventLog(log) as opened:  # what a verdict against other task files could say; the live ones too
        opened.con.execute(
            "UPDATE verdicts SET outcome = 'tampered' WHERE judge = 'ensure_record' AND batch IN (?, 'live')",
            [current.batch],
        )
        compared = compare(opened, {}, {"settle_s": 3.0}, judge_name="ensure_record", workers=1)
    [item] = compared.judges
    after = {judged.outcome for judged in item.new.values()}
    before = {judged.outcome for judged in item.old.values()}
    assert "tampered" not in after and compared.computed > 0, (after, compared.computed)
    assert "tampered" in before, before  # the live verdicts under the old rules are the log's own, used as stored
