"""The study's SQL views: one row per counted run with its verdicts and usage, and the latest verdicts.

Appended to ``schema.VIEWS``, so they exist in every log, offline, for `fae sql`.
docs/study.md describes every column.
"""

from __future__ import annotations

from fae.store.token_counts import (
    CALL_COMPLETION,
    CALL_KNOWN,
    CALL_PROMPT,
    CALL_TOTAL,
    UNKNOWN_CALLS,
    run_sum,
    usage_columns,
    usage_paths,
)

# One row per run × judge × rule set: the most recent verdict (a rejudge appends, never edits).
LATEST_VERDICTS = """
    SELECT v.run_id, v.judge, v.rule_set, v.rule_set_hash, v.rule_set->>'$.mode' AS mode, v.outcome,
           v.passed, v.evidence, v.judged_at, v.batch, v.code_version,
           live.rule_set_hash IS NOT NULL AS live_rules
    FROM verdicts v
    LEFT JOIN (SELECT DISTINCT run_id, judge, rule_set_hash FROM verdicts WHERE batch = 'live') live
      ON live.run_id = v.run_id AND live.judge = v.judge AND live.rule_set_hash = v.rule_set_hash
    QUALIFY row_number() OVER (PARTITION BY v.run_id, v.judge, v.rule_set_hash
                               ORDER BY v.judged_at DESC, v.batch DESC NULLS LAST) = 1
"""

# A spec retried by --resume counts once: the latest attempt of each
# (experiment, phase, task, variation, configuration, trial).
RUN_RESULTS = """
    WITH spec AS (  -- the newest attempt of each spec (a NULL start counts as oldest) and how many it had
        SELECT arg_max(run_id, {'started': started_at IS NOT NULL,
                                'at': coalesce(started_at, TIMESTAMPTZ '1970-01-01 00:00:00+00'),
                                'run_id': run_id}) AS run_id, count(*) AS attempts
        FROM runs GROUP BY coalesce(experiment, ''), coalesce(phase, ''), task_id, variation, agent, repeat
    ),
    attempts AS (SELECT r.*, s.attempts FROM spec s JOIN runs r USING (run_id)),
{LLM}    tools AS (
        SELECT run_id, count(*) AS tool_calls,
               count(*) FILTER (WHERE CAST(payload->>'$.is_error' AS BOOLEAN)) AS tool_errors
        FROM events WHERE kind = 'ToolCalled' AND actor = 'agent' GROUP BY run_id
    ),
    other AS (
        SELECT run_id, count(*) FILTER (WHERE kind = 'FhirInteracted') AS fhir_exchanges,
               coalesce(bool_or(CAST(payload->>'$.accepted' AS BOOLEAN))
                            FILTER (WHERE kind = 'PromptParaphrased'), false) AS paraphrased,
               max(payload->>'$.digest') FILTER (WHERE kind = 'PromptParaphrased') AS paraphrase
        FROM events WHERE (kind = 'FhirInteracted' AND actor = 'agent') OR kind = 'PromptParaphrased'
        GROUP BY run_id
    ),
    per_rule AS (  -- per run, judge and rule set: whether live judging used it, and its newest verdict
        SELECT run_id, judge, any_value(rule_set->>'$.mode') AS mode,
               coalesce(bool_or(batch = 'live'), false) AS live,
               max({'at': judged_at, 'batched': batch IS NOT NULL, 'batch': coalesce(batch, '')}) AS newest,
               arg_max({'outcome': outcome, 'passed': passed},
                       {'at': judged_at, 'batched': batch IS NOT NULL, 'batch': coalesce(batch, '')}) AS verdict
        FROM verdicts GROUP BY run_id, judge, rule_set_hash
    ),
    chosen AS (  -- per run and judge (and task mode): the live rule set's newest verdict, else the newest
        SELECT run_id, judge, mode, arg_max(verdict, {'live': live, 'newest': newest}) AS verdict
        FROM per_rule GROUP BY run_id, judge, mode
    ),
    judged AS (
        SELECT run_id,
               max(verdict.outcome) FILTER (WHERE judge = 'task' AND mode = 'strict') AS strict_outcome,
               bool_or(verdict.passed) FILTER (WHERE judge = 'task' AND mode = 'strict') AS strict_passed,
               max(verdict.outcome) FILTER (WHERE judge = 'task' AND mode = 'light') AS light_outcome,
               bool_or(verdict.passed) FILTER (WHERE judge = 'task' AND mode = 'light') AS light_passed,
               max(verdict.outcome) FILTER (WHERE judge = 'failure_mode') AS failure_mode,
               max(verdict.outcome) FILTER (WHERE judge = 'ensure_record') AS ensure_record,
               max(verdict.outcome) FILTER (WHERE judge = 'oracle') AS oracle
        FROM chosen GROUP BY run_id
    )
    SELECT a.run_id, a.experiment, a.phase, a.suite, a.task_id,
           coalesce(m.family, 'other') AS family, m.difficulty, m.writes, m.gold_calls, m.min_tool_calls,
           a.variation, coalesce(x.paraphrased, false) AS paraphrased, x.paraphrase,
           a.agent AS configuration, a.agent_config->>'$.model' AS model,
           a.repeat AS trial, a.attempts, a.status, a.stop_reason, a.cause, a.error,
           j.strict_outcome, j.light_outcome,
           CASE WHEN a.status IN ('finished', 'errored')
                 AND coalesce(j.strict_outcome, '') NOT IN ('not_applicable', 'task_changed')
                THEN coalesce(j.strict_passed, false) END AS strict,
           CASE WHEN a.status IN ('finished', 'errored')
                 AND coalesce(j.light_outcome, '') NOT IN ('not_applicable', 'task_changed')
                THEN coalesce(j.light_passed, false) END AS light,
           CASE WHEN a.status = 'errored' THEN 'errored' ELSE j.failure_mode END AS failure_mode,
           CASE WHEN a.status <> 'finished' OR j.failure_mode IS NULL OR j.failure_mode IN {LEFT_OUT} THEN NULL
                WHEN j.failure_mode = 'none' THEN []
                WHEN regexp_full_match(j.failure_mode, '[a-z_]+([+][a-z_]+)*') THEN string_split(j.failure_mode, '+')
                ELSE [j.failure_mode] END AS failure_modes,  -- another author's outcome: one label, as written
           j.ensure_record, j.oracle,
           if(l.run_id IS NULL, 0, l.prompt_tokens) AS prompt_tokens,
           if(l.run_id IS NULL, 0, l.completion_tokens) AS completion_tokens,
           if(l.run_id IS NULL, 0, l.total_tokens) AS total_tokens,
           coalesce(l.unknown_token_calls, 0) AS unknown_token_calls,
           coalesce(l.llm_calls, 0) AS llm_calls,
           coalesce(t.tool_calls, 0) AS tool_calls,
           coalesce(t.tool_errors, 0) AS tool_errors,
           coalesce(x.fhir_exchanges, 0) AS fhir_exchanges,
           epoch_ms(a.ended_at) - epoch_ms(a.started_at) AS duration_ms,
           a.started_at
    FROM attempts a
    LEFT JOIN task_meta m ON m.task_id = a.task_id AND m.variation = a.variation
    LEFT JOIN llm l ON l.run_id = a.run_id
    LEFT JOIN tools t ON t.run_id = a.run_id
    LEFT JOIN other x ON x.run_id = a.run_id
    LEFT JOIN judged j ON j.run_id = a.run_id
"""

# the agent's LLM calls per run and their tokens: a run with no call used 0, one with a call of unknown tokens
# (an API fae does not read, no answer, no usage) has an unknown total, never a part-sum
# (fae.store.token_counts); each payload is parsed once, for every usage field together
LLM = f"""    llm AS (
        SELECT run_id, count(*) AS llm_calls, {UNKNOWN_CALLS} AS unknown_token_calls,
               {run_sum(CALL_PROMPT)} AS prompt_tokens,
               {run_sum(CALL_COMPLETION)} AS completion_tokens,
               {run_sum(CALL_TOTAL)} AS total_tokens
        FROM (SELECT run_id, {usage_columns("u")}
              FROM (SELECT run_id, json_extract_string(payload, {usage_paths()}) AS u
                    FROM events WHERE kind = 'LlmCalled' AND actor = 'agent'))
        GROUP BY run_id
    ),
"""
# failure_mode outcomes that are no set of the agent's modes: the run errored, or the judge did not judge it
LEFT_OUT = "('errored', 'error', 'not_applicable', 'task_changed')"
RUN_RESULTS = RUN_RESULTS.replace("{LLM}", LLM).replace("{LEFT_OUT}", LEFT_OUT)

# The agent's LLM usage per run and model, the input of the study's cost (docs/study.md, "Cost"). A call's tokens
# are unknown when its API is one fae does not read, or when it succeeded and its answer gave no usage (a stream
# without usage): such a call is counted in unknown_calls and its tokens in none of the sums, never as zero. A call
# that failed without usage (an HTTP error, no answer) spent nothing; the cache columns are NULL where no answer
# said.
LLM_USAGE = f"""
    SELECT run_id, model, count(*) AS calls,
           count(*) FILTER (WHERE NOT known) AS unknown_calls,
           count(*) FILTER (WHERE failed) AS failed_calls,
           coalesce(sum(prompt_tokens) FILTER (WHERE known), 0) AS prompt_tokens,
           coalesce(sum(completion_tokens) FILTER (WHERE known), 0) AS completion_tokens,
           sum(cache_read_tokens) FILTER (WHERE known) AS cache_read_tokens,
           sum(cache_write_tokens) FILTER (WHERE known) AS cache_write_tokens
    FROM (SELECT *, {CALL_KNOWN} AS known, error IS NOT NULL OR coalesce(status >= 400, false) AS failed
          FROM (SELECT run_id, coalesce(u[6], '(none)') AS model, {usage_columns("u")},
                       CAST(u[7] AS BIGINT) AS cache_read_tokens, CAST(u[8] AS BIGINT) AS cache_write_tokens,
                       u[9] AS error
                FROM (SELECT run_id, json_extract_string(payload, {
    usage_paths("$.model", "$.cache_read_tokens", "$.cache_write_tokens", "$.error")
}) AS u
                      FROM events WHERE kind = 'LlmCalled' AND actor = 'agent')))
    GROUP BY run_id, model
"""
"""Per run and model, the agent's LLM calls and their tokens; a call's tokens known or not as fae.store.token_counts
says, so the cost agrees with every other view."""

STUDY_VIEWS: dict[str, str] = {
    "latest_verdicts": LATEST_VERDICTS,
    "run_results": RUN_RESULTS,
    "llm_usage": LLM_USAGE,
}
