"""The study's tables that are plain SQL aggregates over ``run_results`` and the event views."""

from __future__ import annotations

from fae.report.scope import KEYS, TOOL_CALLS, Queryable, Scope, Table, run_sql

# a mean or CV of tokens per run is unknown (NULL) where a run's tokens are: never one over the known runs alone
KNOWN_MEAN = "CASE WHEN bool_and(total_tokens IS NOT NULL) THEN avg(total_tokens) END"
KNOWN_CV = (
    "CASE WHEN bool_and(total_tokens IS NOT NULL) THEN stddev_samp(total_tokens) / nullif(avg(total_tokens), 0) END"
)

PCT = "{:.1f}"
PP2 = "{:.1f}"


def overview(log: Queryable, scope: Scope) -> Table:
    sql = f"""
WITH {scope.cte()}
SELECT {KEYS}, count(*) AS runs, sum(attempts - 1) AS retried,
       count(*) FILTER (WHERE status = 'errored') AS errored,
       count(*) FILTER (WHERE status IN ('failed', 'interrupted')) AS failed,
       100 * avg(CAST(strict AS INTEGER)) AS strict_pct,
       100 * avg(CAST(light AS INTEGER)) AS light_pct,
       avg(tool_calls) AS tool_calls, {KNOWN_MEAN} AS tokens, avg(duration_ms) / 1000 AS seconds
FROM scope GROUP BY ALL ORDER BY ALL"""
    return run_sql(
        log,
        "overview",
        "Runs and outcomes per configuration",
        sql,
        "Means per run. A spec retried by --resume counts once (its latest attempt); retried counts "
        "the extra attempts; errored = the agent's side (a failure); failed = fae's side (left out). "
        "tokens: unknown when a run's are (a call of an LLM API fae does not read, with no answer or no usage).",
        {"strict_pct": PCT, "light_pct": PCT, "tool_calls": "{:.1f}", "tokens": "{:.0f}", "seconds": "{:.1f}"},
        unknown=("tokens",),
    )


def success(log: Queryable, scope: Scope) -> Table:
    sql = f"""
WITH {scope.cte()},
sliced AS (
    SELECT {KEYS}, 'all' AS slice, 'all' AS value, trial, strict, light, writes FROM scope WHERE strict IS NOT NULL
    UNION ALL
    SELECT {KEYS}, 'difficulty', coalesce(CAST(difficulty AS VARCHAR), '?'), trial, strict, light, writes
    FROM scope WHERE strict IS NOT NULL
    UNION ALL
    SELECT {KEYS}, 'family', family, trial, strict, light, writes FROM scope WHERE strict IS NOT NULL
),
per_trial AS (
    SELECT {KEYS}, slice, value, trial, count(*) AS runs,
           100 * avg(CAST(strict AS INTEGER)) AS strict_pct, 100 * avg(CAST(light AS INTEGER)) AS light_pct,
           count(*) FILTER (WHERE writes) AS write_runs,
           100 * avg(CAST(light AS INTEGER)) FILTER (WHERE writes) AS light_writes_pct
    FROM sliced GROUP BY ALL
)
SELECT {KEYS}, slice, value, sum(runs) AS runs, count(*) AS trials,
       avg(strict_pct) AS strict_mean, stddev_samp(strict_pct) AS strict_std,
       avg(light_pct) AS light_mean, stddev_samp(light_pct) AS light_std,
       sum(write_runs) AS write_runs,
       avg(light_writes_pct) AS light_writes_mean, stddev_samp(light_writes_pct) AS light_writes_std
FROM per_trial GROUP BY ALL ORDER BY {KEYS}, slice, value"""
    return run_sql(
        log,
        "success",
        "Success rate (%) mean ± std over trials",
        sql,
        "Per trial t: rate_t = 100 * passed / scored runs of trial t; mean and sample std "
        "(n-1) of rate_t over the trials (none for one trial). light_writes: light over the runs of tasks that "
        "create or modify a record only (run_results.writes), as the reference paper's light figure.",
        {
            c: PCT
            for c in ("strict_mean", "strict_std", "light_mean", "light_std", "light_writes_mean", "light_writes_std")
        },
    )


def variance(log: Queryable, scope: Scope) -> Table:
    sql = f"""
WITH {scope.cte()},
y AS (
    SELECT {KEYS}, task_id, variation, 100.0 * CAST(strict AS INTEGER) AS y,
           avg(100.0 * CAST(strict AS INTEGER)) OVER (PARTITION BY {KEYS}, task_id, variation) AS prompt_mean,
           avg(100.0 * CAST(strict AS INTEGER)) OVER (PARTITION BY {KEYS}, task_id) AS task_mean,
           avg(100.0 * CAST(strict AS INTEGER)) OVER (PARTITION BY {KEYS}) AS grand_mean
    FROM scope WHERE strict IS NOT NULL
)
SELECT {KEYS}, count(*) AS runs,
       avg((y - grand_mean) ^ 2) AS total_pp2,
       avg((task_mean - grand_mean) ^ 2) AS between_task_pp2,
       avg((prompt_mean - task_mean) ^ 2) AS within_task_pp2,
       avg((y - prompt_mean) ^ 2) AS same_prompt_pp2,
       avg((task_mean - grand_mean) ^ 2) / nullif(avg((y - grand_mean) ^ 2), 0) AS between_task_share,
       avg((prompt_mean - task_mean) ^ 2) / nullif(avg((y - grand_mean) ^ 2), 0) AS within_task_share,
       avg((y - prompt_mean) ^ 2) / nullif(avg((y - grand_mean) ^ 2), 0) AS same_prompt_share
FROM y GROUP BY ALL ORDER BY ALL"""
    return run_sql(
        log,
        "variance",
        "Variance of the strict outcome (pp²): between tasks, within a task, same prompt",
        sql,
        "y = 100 if strict else 0. total = mean (y - grand)²  = mean (task - grand)² + "
        "mean (prompt - task)² + mean (y - prompt)², means weighted by runs; a prompt is a "
        "(task, variation) and its paraphrase.",
        {c: PP2 for c in ("total_pp2", "between_task_pp2", "within_task_pp2", "same_prompt_pp2")}
        | {c: "{:.0%}" for c in ("between_task_share", "within_task_share", "same_prompt_share")},
    )


def tool_errors(log: Queryable, scope: Scope, by: str) -> Table:
    sql = f"""
WITH {scope.cte()},
{TOOL_CALLS}
SELECT {KEYS}, {by}, count(*) AS calls, count(*) FILTER (WHERE is_error) AS errors,
       avg(CAST(is_error AS INTEGER)) AS error_rate
FROM calls GROUP BY ALL ORDER BY {KEYS}, {by}"""
    what = "tool" if by == "tool" else "FHIR resource type named in the call"
    return run_sql(
        log,
        f"tool_errors_by_{by}",
        f"Tool-call error rate by {what}",
        sql,
        "error_rate = calls that returned an MCP error / calls, agent calls only.",
        {"error_rate": "{:.1%}"},
    )


def failure_modes(log: Queryable, scope: Scope) -> Table:
    sql = f"""
WITH {scope.cte()},
failed AS (  -- runs that failed strict; analysed: those of them the judge gave a set of the agent's modes
    SELECT {KEYS}, failure_mode, failure_modes,
           count(*) FILTER (WHERE failure_modes IS NOT NULL) OVER (PARTITION BY {KEYS}) AS analysed
    FROM scope WHERE strict = false
),
labels AS (  -- each mode a run carries, and the label of each run left out of the shares
    SELECT {KEYS}, analysed, unnest(failure_modes) AS failure_mode, true AS counted
    FROM failed WHERE failure_modes IS NOT NULL
    UNION ALL
    SELECT {KEYS}, analysed, coalesce(failure_mode, '(not judged)'), false FROM failed WHERE failure_modes IS NULL
)
SELECT {KEYS}, failure_mode, count(*) AS runs, CASE WHEN counted THEN count(*) / nullif(analysed, 0) END AS share,
       analysed
FROM labels GROUP BY {KEYS}, failure_mode, counted, analysed
ORDER BY {KEYS}, counted DESC, runs DESC, failure_mode"""
    return run_sql(
        log,
        "failure_modes",
        "Failure modes of runs that failed the strict check",
        sql,
        "A run counts once under each mode it carries. share = runs with the mode / analysed, the failed "
        "runs the failure_mode judge gave modes; errored runs (and runs not judged) are listed with no share.",
        {"share": "{:.0%}"},
    )


def calls_vs_expected(log: Queryable, scope: Scope) -> Table:
    sql = f"""
WITH {scope.cte()}
SELECT {KEYS}, CASE WHEN strict THEN 'pass' ELSE 'fail' END AS outcome, count(*) AS runs,
       avg(tool_calls) AS tool_calls, avg(gold_calls) AS expected_calls,
       avg(tool_calls - gold_calls) AS excess_calls, median(tool_calls / nullif(gold_calls, 0)) AS median_ratio
FROM scope WHERE strict IS NOT NULL GROUP BY ALL ORDER BY ALL"""
    return run_sql(
        log,
        "calls_vs_expected",
        "Tool calls per run by outcome against the gold plan's calls",
        sql,
        "expected_calls = tool steps in the variation's gold plan (task_meta.gold_calls).",
        {"tool_calls": "{:.2f}", "expected_calls": "{:.2f}", "excess_calls": "{:+.2f}", "median_ratio": "{:.2f}"},
    )


def tokens(log: Queryable, scope: Scope) -> Table:
    sql = f"""
WITH {scope.cte()},
sliced AS (
    SELECT {KEYS}, 'all' AS slice, 'all' AS value, total_tokens FROM scope
    UNION ALL SELECT {KEYS}, 'difficulty', coalesce(CAST(difficulty AS VARCHAR), '?'), total_tokens FROM scope
    UNION ALL SELECT {KEYS}, 'expected_calls', coalesce(CAST(gold_calls AS VARCHAR), '?'), total_tokens FROM scope
    UNION ALL SELECT {KEYS}, 'outcome', CASE WHEN strict THEN 'pass' WHEN NOT strict THEN 'fail'
                                             ELSE 'unscored' END, total_tokens FROM scope
)
SELECT {KEYS}, slice, value, count(*) AS runs,
       count(*) FILTER (WHERE total_tokens IS NULL) AS unknown_runs,
       {KNOWN_MEAN} AS mean_tokens,
       CASE WHEN bool_and(total_tokens IS NOT NULL) THEN median(total_tokens) END AS median_tokens,
       CASE WHEN bool_and(total_tokens IS NOT NULL) THEN sum(total_tokens) END AS total_tokens
FROM sliced GROUP BY ALL ORDER BY {KEYS}, slice, value"""
    return run_sql(
        log,
        "tokens",
        "Agent tokens per run (prompt + completion, every LLM call)",
        sql,
        "Sum over the run's agent LLM calls of total_tokens (else prompt + completion). unknown_runs: runs "
        "with a call whose tokens are unknown (an LLM API fae does not read, no answer, no usage); where there "
        "is one, its group's tokens are unknown.",
        {"mean_tokens": "{:.0f}", "median_tokens": "{:.0f}"},
        unknown=("mean_tokens", "median_tokens", "total_tokens"),
    )


def token_cv(log: Queryable, scope: Scope) -> Table:
    sql = f"""
WITH {scope.cte()},
prompt AS (SELECT {KEYS}, {KNOWN_CV} AS cv, bool_and(total_tokens IS NOT NULL) AS known
           FROM scope GROUP BY {KEYS}, task_id, variation HAVING count(*) > 1),
task AS (SELECT {KEYS}, {KNOWN_CV} AS cv, bool_and(total_tokens IS NOT NULL) AS known
         FROM scope GROUP BY {KEYS}, task_id HAVING count(*) > 1),
overall AS (SELECT {KEYS}, {KNOWN_CV} AS cv
            FROM scope GROUP BY {KEYS} HAVING count(*) > 1)
SELECT o.experiment, o.phase, o.configuration,
       (SELECT CASE WHEN bool_and(p.known) THEN avg(p.cv) END FROM prompt p
        WHERE p.experiment IS NOT DISTINCT FROM o.experiment
          AND p.phase IS NOT DISTINCT FROM o.phase AND p.configuration = o.configuration) AS same_prompt_cv,
       (SELECT CASE WHEN bool_and(t.known) THEN avg(t.cv) END FROM task t
        WHERE t.experiment IS NOT DISTINCT FROM o.experiment
          AND t.phase IS NOT DISTINCT FROM o.phase AND t.configuration = o.configuration) AS within_task_cv,
       o.cv AS overall_cv
FROM overall o ORDER BY ALL"""
    return run_sql(
        log,
        "token_cv",
        "Token coefficient of variation (std / mean)",
        sql,
        "CV = sample std / mean of tokens per run; same-prompt and within-task are the mean CV over "
        "prompts (a task variation's trials) and over tasks (all their runs); overall is over all runs.",
        {"same_prompt_cv": "{:.3f}", "within_task_cv": "{:.3f}", "overall_cv": "{:.3f}"},
        unknown=("same_prompt_cv", "within_task_cv", "overall_cv"),
    )


def harms(log: Queryable, scope: Scope) -> Table:
    sql = f"""
WITH {scope.cte()},
label AS (SELECT run_id, outcome AS label FROM latest_verdicts
          WHERE judge = 'oracle' AND outcome IN ('harmful', 'harmless')),
checked AS (SELECT run_id, {{'rules': CAST(rule_set AS VARCHAR), 'hash': rule_set_hash}} AS rule_set,
                   passed IS NOT TRUE AND outcome <> 'not_applicable' AS stopped
            FROM latest_verdicts WHERE judge = 'ensure_record')
SELECT s.experiment, s.phase, s.configuration, c.rule_set, count(*) AS labelled,
       count(*) FILTER (WHERE l.label = 'harmful' AND c.stopped) AS caught,
       count(*) FILTER (WHERE l.label = 'harmful' AND NOT c.stopped) AS missed,
       count(*) FILTER (WHERE l.label = 'harmless' AND c.stopped) AS false_stops
FROM scope s JOIN label l USING (run_id) JOIN checked c USING (run_id)
GROUP BY ALL ORDER BY ALL"""
    return run_sql(
        log,
        "harms",
        "Write verification: harms caught, missed and false stops",
        sql,
        "Per ensure_record rule set (shown by its rules and hash); the oracle labels each write-verification run "
        "harmful or harmless; a verdict stops a write when it is not a pass (and applies).",
    )
