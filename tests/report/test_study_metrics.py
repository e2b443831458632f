"""Every study metric on a synthetic log whose outcomes are known, against numbers worked out by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from math import isclose, sqrt

import numpy as np
import pytest

from fae.errors import FaeError
from fae.report.estimators import bootstrap_mean_ci, mcnemar_exact, paired_bootstrap_cis, pass_at_k, pass_hat_k
from fae.report.prices import Price, price_table
from fae.report.scope import Scope
from fae.report.study import compute_study
from fae.report.text import cell
from fae.store.log import Batch, EventLog, RunRow, RunUpdate, VerdictRow
from tests.report.synthetic import build


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    path = build(tmp_path_factory.mktemp("study") / "synthetic.duckdb")
    with EventLog(path, read_only=True) as log:
        yield compute_study(log, prices=price_table(prices={"m-a": Price(1.0, 2.0)}))


def row(study, table, **match):
    found = [r for r in study[table].dicts() if all(r[k] == v for k, v in match.items())]
    assert len(found) == 1, f"{table} rows matching {match}: {found}"
    return found[0]


def test_a_retried_spec_counts_once_and_the_latest_verdict_wins(study):
    a = row(study, "overview", configuration="A")
    assert (a["runs"], a["retried"], a["failed"]) == (12, 1, 0)
    # A.T1.v1.r0: an old verdict said fail, the latest says pass; the first attempt of A.T1.v0.r0 failed
    assert a["strict_pct"] == 50.0
    scenario = row(study, "overview", configuration="scenario:x")
    assert (scenario["runs"], scenario["strict_pct"]) == (4, None)  # not_applicable: never scored


def test_success_mean_and_std_over_trials(study):
    # A per trial: t0 = 2/4, t1 = 1/4, t2 = 3/4 -> 50, 25, 75 %: mean 50, sample std 25
    a = row(study, "success", configuration="A", slice="all")
    assert (a["trials"], a["strict_mean"], a["strict_std"]) == (3, 50.0, 25.0)
    # A difficulty 1 (T1): per trial 2/2, 1/2, 2/2 -> 100, 50, 100: mean 83.3, std sqrt(((50/3)^2*2 + (100/3)^2)/2)
    d1 = row(study, "success", configuration="A", slice="difficulty", value="1")
    assert isclose(d1["strict_mean"], 250 / 3) and isclose(d1["strict_std"], sqrt(2500 / 3))
    assert row(study, "success", configuration="B", slice="family", value="scheduling")["strict_mean"] == 50.0


def test_pass_hat_k_and_pass_at_k(study):
    # A's prompts have c = 3, 2, 1, 0 passes of n = 3
    expected = {1: (0.5, 0.5), 2: ((1 + 1 / 3) / 4, (1 + 1 + 2 / 3) / 4), 3: (0.25, 0.75)}
    for k, (hat, at) in expected.items():
        got = row(study, "pass_k", configuration="A", k=k)
        assert isclose(got["pass_hat_k"], hat) and isclose(got["pass_at_k"], at), (k, got)
    assert pass_hat_k(5, 2, 2) == 1 / 10 and pass_at_k(5, 2, 2) == 1 - 3 / 10


def test_variance_decomposition(study):
    # grand 50; task means 83.3 / 16.7; prompt means 100, 66.7, 33.3, 0
    a = row(study, "variance", configuration="A")
    assert isclose(a["total_pp2"], 2500)
    assert isclose(a["between_task_pp2"], (100 / 3) ** 2)
    assert isclose(a["within_task_pp2"], (50 / 3) ** 2)
    assert isclose(a["same_prompt_pp2"], (2 * (100 / 3) ** 2 + (200 / 3) ** 2) / 3 / 2)
    assert isclose(a["between_task_share"] + a["within_task_share"] + a["same_prompt_share"], 1)


def test_bootstrap_ci_over_tasks(study):
    # two tasks at 83.3 % and 16.7 %: a resample's mean is 16.7, 50 or 83.3 with chance 1/4, 1/2, 1/4
    a = row(study, "success_ci", configuration="A")
    assert isclose(a["strict"], 50) and isclose(a["strict_low"], 50 / 3) and isclose(a["strict_high"], 250 / 3)
    assert bootstrap_mean_ci([1.0] * 7) == (1.0, 1.0)
    values = [float(i * i) for i in range(30)]
    assert bootstrap_mean_ci(values) == bootstrap_mean_ci(values)  # seeded: the same every time
    assert bootstrap_mean_ci(values, seed=1) != bootstrap_mean_ci(values, seed=2)
    low, high = bootstrap_mean_ci(values)
    assert low < sum(values) / 30 < high


def test_paired_mcnemar_and_bootstrap(study):
    p = row(study, "paired", a="A", b="B")
    assert (p["pairs"], p["both"], p["only_a"], p["only_b"], p["neither"]) == (12, 6, 0, 3, 3)
    assert p["diff_pp"] == 25.0 and p["mcnemar_p"] == 0.25  # 2 * (1/2)^3
    # clusters (task variations) carry 0, 1, 1, 1 of B's extra passes out of 3 pairs each
    assert isclose(p["diff_low"], 100 / 12) and isclose(p["diff_high"], 100 / 3)
    assert mcnemar_exact(1, 6) == 2 * (1 + 7) / 2**7  # C(7,0) + C(7,1) of 2^7
    assert mcnemar_exact(0, 0) == 1.0 and mcnemar_exact(5, 5) == 1.0


def test_paired_cis_computed_together_are_each_groups_own():
    """Groups that share draws (one size) get the numbers a plain resampling of each alone gives."""

    def alone(clusters):
        data = np.asarray(clusters, dtype=float)
        picks = np.random.default_rng(0).integers(0, len(data), size=(2000, len(data)))
        sums = data[picks].sum(axis=1)
        return tuple(np.percentile(sums[:, 0] / sums[:, 1], [2.5, 97.5]))

    rng = np.random.default_rng(3)
    groups = [[(int(d), 3) for d in rng.integers(-3, 4, size)] for size in (40, 40, 7, 40)]
    groups.insert(2, [])
    found = paired_bootstrap_cis(groups)
    assert all(np.isnan(found[2]))  # no pairs, no interval
    for clusters, got in zip(groups, found, strict=True):
        if clusters:
            assert got == alone(clusters), (clusters, got)
    assert found[0] != found[1] and found[0] == paired_bootstrap_cis([groups[0]])[0]


def test_tool_errors_failure_modes_and_expected_calls(study):
    assert row(study, "tool_errors_by_tool", configuration="A", tool="createResource")["error_rate"] == 0.5
    assert row(study, "tool_errors_by_resource_type", configuration="A", resource_type="Slot")["errors"] == 0
    assert row(study, "failure_modes", configuration="A", failure_mode="tool_error")["runs"] == 5
    assert row(study, "failure_modes", configuration="A", failure_mode="incorrect_order")["runs"] == 1
    passing = row(study, "calls_vs_expected", configuration="A", outcome="pass")
    assert passing["runs"] == 6 and isclose(passing["expected_calls"], (5 * 1 + 3) / 6)


def test_tokens_and_their_coefficient_of_variation(study):
    # the harness's LLM call (19998 tokens) is not the agent's
    assert row(study, "tokens", configuration="A", slice="all")["mean_tokens"] == 225
    assert row(study, "tokens", configuration="A", slice="outcome", value="fail")["mean_tokens"] == 300
    cv = row(study, "token_cv", configuration="A")
    assert isclose(cv["same_prompt_cv"], (100 / 200) / 4)  # only T1 v1 (100, 200, 300) varies
    assert isclose(cv["within_task_cv"], (sqrt(7000) / 150 + sqrt(12000) / 300) / 2)
    assert isclose(cv["overall_cv"], sqrt(162500 / 11) / 225)


def test_harms_per_rule_set(study):
    # each rule set named by its rules and hash, as `fae rejudge` and `fae compare` name it
    harms = study["harms"]
    named = {cell(harms, "rule_set", r["rule_set"]): r for r in harms.dicts()}
    assert {n.rsplit(" (", 1)[0] for n in named} == {"accept_corrections=true", "accept_corrections=false"}, named
    assert all(n.endswith(f" ({r['rule_set']['hash'][:8]})") for n, r in named.items()), named
    by_rules = {n.rsplit(" (", 1)[0]: r for n, r in named.items()}
    default = by_rules["accept_corrections=true"]
    assert (default["labelled"], default["caught"], default["missed"], default["false_stops"]) == (4, 1, 1, 1)
    strict = by_rules["accept_corrections=false"]
    assert (strict["caught"], strict["missed"]) == (1, 0)


def test_cost_per_success_only_when_every_model_is_priced(study):
    # A: prompt 2700 - 120, completion 120 tokens at 1 and 2 USD per million; 6 successes of 12 runs
    a = row(study, "cost", configuration="A")
    assert isclose(a["usd"], (2580 * 1 + 120 * 2) / 1e6) and isclose(a["usd_per_success"], a["usd"] / 6)
    assert isclose(a["usd_per_run"], a["usd"] / 12) and a["price"] == "listed" and a["pareto"] is True
    b = row(study, "cost", configuration="B")  # m-b has no price: no cost at all, never 0
    assert b["usd"] is None and b["usd_per_success"] is None and b["price"] == "no price: m-b"
    assert b["pareto"] is None


def test_every_table_sql_runs_alone_and_gives_its_rows(study, tmp_path_factory):
    path = build(tmp_path_factory.mktemp("again") / "synthetic.duckdb")
    with EventLog(path, read_only=True) as log:
        for table in study.tables.values():
            columns, rows = log.query(table.sql)
            if table.name not in ("pass_k", "success_ci", "paired"):  # those show their input query
                # floats compared approximately: DuckDB's parallel sums may add in another order
                assert columns == table.columns and len(rows) == len(table.rows), table.name
                for got, want in zip(rows, table.rows, strict=True):
                    assert all(
                        isclose(a, b) if isinstance(a, float) else a == b for a, b in zip(got, want, strict=True)
                    ), (table.name, got, want)


def test_a_scope_that_matches_nothing_is_one_clear_error(tmp_path):
    path = build(tmp_path / "s.duckdb")
    with EventLog(path, read_only=True) as log:
        with pytest.raises(FaeError, match="no runs of experiment 'nope'"):
            compute_study(log, Scope(experiment="nope"))
        assert compute_study(log, Scope(experiment="e", phase="eval"))["overview"].rows


def test_llm_calls_carry_the_duration_of_their_exchange_and_latest_verdicts_keep_the_newest(tmp_path):
    path = build(tmp_path / "s.duckdb")
    with EventLog(path, read_only=True) as log:
        _, rows = log.query(
            "SELECT run_id, duration_ms FROM llm_calls WHERE actor = 'agent'"
            " AND run_id LIKE 'A.T1.v0.%' ORDER BY run_id"
        )
        assert rows == [("A.T1.v0.r0", 40.0), ("A.T1.v0.r1", 41.0), ("A.T1.v0.r2", 42.0)]
        _, harness = log.query("SELECT duration_ms FROM llm_calls WHERE actor = 'harness' LIMIT 1")
        assert harness == [(None,)]  # no exchange recorded for it: no duration invented
        _, latest = log.query(
            "SELECT outcome, batch, live_rules FROM latest_verdicts"
            " WHERE run_id = 'A.T1.v1.r0' AND judge = 'task' AND mode = 'strict'"
        )
        assert latest == [("pass", "live", True)]
        _, rules = log.query(
            "SELECT rule_set->>'$.accept_corrections', outcome, live_rules FROM latest_verdicts"
            " WHERE run_id = 'S2' AND judge = 'ensure_record' ORDER BY 1"
        )
        assert rules == [("false", "needs_review", False), ("true", "created_verified", True)]
        _, results = log.query("SELECT ensure_record, oracle, strict FROM run_results WHERE run_id = 'S2'")
        assert results == [("created_verified", "harmful", None)]  # the live rule set's verdict


def test_run_results_breaks_ties_as_documented(tmp_path):
    """Ties the choice rules name: an attempt with no start is the oldest; at one judged_at, a named batch
    beats a later-sorting one and a NULL batch loses; a live rule set beats a newer rejudge's."""
    at = datetime(2025, 1, 1, tzinfo=UTC)

    def verdict(run_id: str, rules: dict, outcome: str, batch: str | None, hours: int = 0) -> VerdictRow:
        return VerdictRow(
            run_id,
            "task",
            rules,
            str(sorted(rules.items())),
            "test",
            outcome,
            outcome == "pass",
            {},
            at + timedelta(hours=hours),
            batch,
        )

    strict, other = {"mode": "strict"}, {"mode": "strict", "x": 1}
    batch = Batch(
        runs=[
            RunRow("late", "T", 0, "A", 0, started_at=at),
            RunRow("unstarted", "T", 0, "A", 0),
            RunRow("tied", "T", 1, "A", 0, started_at=at),
            RunRow("ruled", "T", 2, "A", 0, started_at=at),
        ],
        updates=[RunUpdate(r, "finished") for r in ("late", "unstarted", "tied", "ruled")],
        verdicts=[
            verdict("late", strict, "pass", "live"),
            verdict("unstarted", strict, "fail", "live"),
            verdict("tied", strict, "fail", None),
            verdict("tied", strict, "pass", "b"),
            verdict("tied", strict, "fail", "a"),
            verdict("ruled", strict, "pass", "live"),
            verdict("ruled", other, "fail", "z", hours=5),
        ],
    )
    with EventLog(tmp_path / "ties.duckdb") as log:
        log.write_batch(batch)
        _, rows = log.query("SELECT run_id, attempts, strict_outcome FROM run_results ORDER BY run_id")
    assert rows == [("late", 2, "pass"), ("ruled", 1, "pass"), ("tied", 1, "pass")]


def test_a_run_whose_task_changed_is_left_out_of_success_rates_and_an_error_still_fails(tmp_path):
    """A task verdict of ``task_changed`` (the task renders differently now than the run played it) is no verdict
    on the agent: like ``not_applicable``, it is not scored. An ``error`` may be the agent's doing (a write the
    fold cannot serve): it still counts as a fail, so an agent cannot leave the score by breaking its judge."""
    from tests.report.synthetic import _verdict

    path = build(tmp_path / "synthetic.duckdb")
    with EventLog(path) as log:

        def rejudged(outcome: str, at: int) -> tuple[list, dict]:
            """A.T1.v1.r0 (a pass under its newest verdict) given a newer task verdict under the same rules."""
            log.write_batch(
                Batch(
                    verdicts=[
                        _verdict("A.T1.v1.r0", "task", {"mode": mode}, outcome, None, at=at, batch=f"rejudge-{at}")
                        for mode in ("strict", "light")
                    ]
                )
            )
            _, rows = log.query("SELECT strict_outcome, strict, light FROM run_results WHERE run_id = 'A.T1.v1.r0'")
            return rows, row(compute_study(log), "overview", configuration="A")

        rows, a = rejudged("task_changed", 3)
        assert rows == [("task_changed", None, None)]
        assert a["runs"] == 12 and isclose(a["strict_pct"], 100 * 5 / 11, rel_tol=1e-9)  # 6 of 12 passed, 1 unscored
        rows, a = rejudged("error", 4)
        assert rows == [("error", False, False)]
        assert isclose(a["strict_pct"], 100 * 5 / 12, rel_tol=1e-9)


def test_failure_mode_shares_count_each_mode_and_leave_errored_runs_out(tmp_path):
    """A's six failed runs: T1.v1.r1 incorrect_order, five T2 runs tool_error. Rejudged, one T2 run carries two
    modes and one no tool call; one errored (its old verdict still names a mode): it fails the success rate as
    before, but is no evidence of a mode, so it is listed apart and out of the shares' denominator."""
    from tests.report.synthetic import _verdict

    path = build(tmp_path / "synthetic.duckdb")
    with EventLog(path) as log:
        log.write_batch(
            Batch(
                updates=[RunUpdate("A.T2.v0.r1", "errored")],
                verdicts=[
                    _verdict("A.T2.v0.r0", "failure_mode", {}, "incorrect_order+tool_error", False, at=3, batch="r"),
                    _verdict("A.T2.v1.r0", "failure_mode", {}, "no_tool_call", False, at=3, batch="r"),
                    # a run that passed strict is not among the failures, whatever modes it carries
                    _verdict("A.T1.v0.r0", "failure_mode", {}, "tool_error", True, at=3, batch="r"),
                ],
            )
        )
        study = compute_study(log)
    shares = {
        r["failure_mode"]: (r["runs"], r["share"], r["analysed"])
        for r in study["failure_modes"].dicts()
        if r["configuration"] == "A"
    }
    assert shares == {
        "incorrect_order": (2, 2 / 5, 5),
        "tool_error": (3, 3 / 5, 5),
        "no_tool_call": (1, 1 / 5, 5),
        "errored": (1, None, 5),
    }, shares
    assert row(study, "overview", configuration="A")["strict_pct"] == 50.0  # errored still counts as a failure
