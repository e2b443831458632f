"""``fae rejudge --ray`` and ``fae compare --ray``, of a log or of its Parquet export: shards judged as Ray tasks on a
two-node cluster give the verdicts local judging gives."""

from __future__ import annotations

import os
import shutil

from fae import api
from fae.store.export import export_parquet, query_parquet
from fae.store.log import EventLog

RULES = "accept_corrections=false"


def _verdicts(log, batch: str) -> list[tuple]:
    with EventLog(log, read_only=True) as opened:
        _, rows = opened.query(
            "SELECT run_id, judge, rule_set, rule_set_hash, code_version, outcome, passed, evidence FROM verdicts"
            " WHERE batch = ? ORDER BY run_id, judge, rule_set_hash",
            [batch],
        )
    return rows


def test_rejudge_on_ray_writes_the_verdicts_local_judging_writes(ray_cluster, scenario_log, tmp_path):
    log = tmp_path / "scenarios.duckdb"
    shutil.copy(scenario_log, log)
    local = api.rejudge(log, rules=RULES, workers=2, full=True)
    on_ray = api.rejudge(log, rules=RULES, workers=2, ray="auto", full=True)
    assert len(on_ray.shards) == 2 and all(shard.runs for shard in on_ray.shards)  # both tasks judged runs
    assert on_ray.runs == local.runs and on_ray.outcomes == local.outcomes
    expected, got = _verdicts(log, local.batch), _verdicts(log, on_ray.batch)
    assert got == expected and len(got) == on_ray.verdicts
    assert {row[5] for row in got if row[1] == "ensure_record"} - {"not_applicable"}, "no write was verified"
    with EventLog(log, read_only=True) as opened:
        _, rows = opened.query(
            "SELECT completed_at IS NOT NULL, judged_runs FROM verdict_batches WHERE batch = ?", [on_ray.batch]
        )
    assert rows == [(True, on_ray.runs)]  # the batch is complete exactly when its verdicts are in


def test_an_export_rejudged_on_ray_gives_the_verdicts_of_its_log(ray_cluster, scenario_log, tmp_path):
    log, directory = tmp_path / "scenarios.duckdb", tmp_path / "export"
    shutil.copy(scenario_log, log)
    export_parquet(log, directory)
    local = api.rejudge(log, rules=RULES, workers=1, full=True)
    on_ray = api.rejudge(parquet=directory, rules=RULES, workers=2, ray="auto")
    assert len(on_ray.shards) == 2 and all(shard.runs and shard.pid != os.getpid() for shard in on_ray.shards)
    _, got = query_parquet(
        directory,
        "SELECT run_id, judge, rule_set, rule_set_hash, code_version, outcome, passed,"
        " evidence FROM verdicts WHERE batch = ? ORDER BY run_id, judge, rule_set_hash",
        [on_ray.batch],
    )
    assert got == _verdicts(log, local.batch) and len(got) == on_ray.verdicts
    assert query_parquet(directory, "SELECT complete, judged_runs FROM batch_status WHERE batch = ?", [on_ray.batch])[
        1
    ] == [(True, on_ray.runs)]


def test_compare_on_ray_judges_the_missing_verdicts_as_compare_here_does(ray_cluster, scenario_log, tmp_path):
    log, directory = tmp_path / "scenarios.duckdb", tmp_path / "export"
    shutil.copy(scenario_log, log)
    export_parquet(log, directory)
    # from the events: the findings the log keeps would decide every verdict without a shard
    here = api.compare(log, RULES, "", judge_name="ensure_record", workers=1, from_events=True)
    for where in ({"log": log}, {"log": None, "parquet": directory}):
        on_ray = api.compare(
            old=RULES, new="", judge_name="ensure_record", workers=2, ray="auto", from_events=True, **where
        )
        assert len(on_ray.shards) == 2 and all(shard.pid != os.getpid() for shard in on_ray.shards), where
        assert on_ray.computed == here.computed > 0
        assert [(j.transitions, sorted(j.flipped), j.harms) for j in on_ray.judges] == [
            (j.transitions, sorted(j.flipped), j.harms) for j in here.judges
        ]
