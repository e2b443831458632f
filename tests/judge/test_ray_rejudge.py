"""``fae rejudge --ray``: shards judged as Ray tasks on a two-node cluster give the verdicts local judging gives."""

from __future__ import annotations

import shutil

from fae import api
from fae.store.log import EventLog

RULES = "accept_corrections=false"


def _verdicts(log, batch: str) -> list[tuple]:
    with EventLog(log, read_only=True) as opened:
        _, rows = opened.query(
            "SELECT run_id, judge, rule_set, rule_set_hash, code_version, outcome, passed, evidence FROM verdicts"
            " WHERE batch = ? ORDER BY run_id, judge, rule_set_hash", [batch])
    return rows


def test_rejudge_on_ray_writes_the_verdicts_local_judging_writes(ray_cluster, scenario_log, tmp_path):
    log = tmp_path / "scenarios.duckdb"
    shutil.copy(scenario_log, log)
    local = api.rejudge(log, rules=RULES, workers=2)
    on_ray = api.rejudge(log, rules=RULES, workers=2, ray="auto")
    assert len(on_ray.shards) == 2 and all(shard.runs for shard in on_ray.shards)  # both tasks judged runs
    assert on_ray.runs == local.runs and on_ray.outcomes == local.outcomes
    expected, got = _verdicts(log, local.batch), _verdicts(log, on_ray.batch)
    assert got == expected and len(got) == on_ray.verdicts
    assert {row[5] for row in got if row[1] == "ensure_record"} - {"not_applicable"}, "no write was verified"
    with EventLog(log, read_only=True) as opened:
        _, rows = opened.query("SELECT completed_at IS NOT NULL, judged_runs FROM verdict_batches WHERE batch = ?",
                               [on_ray.batch])
    assert rows == [(True, on_ray.runs)]  # the batch is complete exactly when its verdicts are in
