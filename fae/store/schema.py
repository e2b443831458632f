"""The log's tables, their numbered migrations, and the documented SQL views.

Each migration is applied once, in order, inside one transaction, and bumps
``schema_version``. Views are code, not data: they are recreated on every open
so a newer fae can improve them without a migration. docs/log.md describes
every column.
"""

from __future__ import annotations

from fae.store.study_views import STUDY_VIEWS
from fae.store.token_counts import CALL_KNOWN, CALL_TOTAL, run_sum, usage_columns, usage_paths

MIGRATIONS: tuple[str, ...] = (
    # 1: the spine
    """
    CREATE TABLE runs (
        run_id       VARCHAR PRIMARY KEY,
        suite        VARCHAR,
        task_id      VARCHAR NOT NULL,
        variation    INTEGER NOT NULL,
        agent        VARCHAR NOT NULL,
        agent_config JSON,
        repeat       INTEGER NOT NULL,
        status       VARCHAR NOT NULL,
        started_at   TIMESTAMPTZ,
        ended_at     TIMESTAMPTZ,
        stop_reason  VARCHAR,
        error        VARCHAR
    );
    CREATE TABLE events (
        run_id    VARCHAR NOT NULL,
        seq       BIGINT NOT NULL,
        kind      VARCHAR NOT NULL,
        wall_time TIMESTAMPTZ NOT NULL,
        mono_ns   BIGINT NOT NULL,
        actor     VARCHAR,
        upstream  VARCHAR,
        payload   JSON NOT NULL
    );
    CREATE TABLE blobs (
        hash VARCHAR NOT NULL,
        size BIGINT NOT NULL,
        data BLOB NOT NULL
    );
    CREATE TABLE verdicts (
        run_id        VARCHAR NOT NULL,
        judge         VARCHAR NOT NULL,
        rule_set      JSON NOT NULL,
        rule_set_hash VARCHAR NOT NULL,
        code_version  VARCHAR NOT NULL,
        outcome       VARCHAR NOT NULL,
        passed        BOOLEAN,
        evidence      JSON,
        judged_at     TIMESTAMPTZ NOT NULL,
        batch         VARCHAR
    );
    """,
    # 2: who recorded the log, for support questions
    """
    CREATE TABLE log_info (key VARCHAR PRIMARY KEY, value VARCHAR);
    """,
    # 3: journal segments already moved into the log, so a replay applies each once
    """
    CREATE TABLE journal_applied (segment VARCHAR PRIMARY KEY, applied_at TIMESTAMPTZ);
    """,
    # 4: the study's run metadata, and who ended a run that did not finish
    """
    ALTER TABLE runs ADD COLUMN experiment VARCHAR;
    ALTER TABLE runs ADD COLUMN phase VARCHAR;
    ALTER TABLE runs ADD COLUMN cause VARCHAR;
    """,
    # 5: verdict batches: a rejudge's start and completion, so a killed one shows as incomplete
    """
    CREATE TABLE verdict_batches (
        batch        VARCHAR PRIMARY KEY,
        kind         VARCHAR NOT NULL,
        judges       JSON,
        planned_runs INTEGER,
        started_at   TIMESTAMPTZ,
        completed_at TIMESTAMPTZ,
        judged_runs  INTEGER
    );
    """,
    # 6: task metadata beside the runs, so the study's views work on a log alone
    """
    CREATE TABLE task_meta (
        task_id        VARCHAR NOT NULL,
        variation      INTEGER NOT NULL,
        family         VARCHAR,
        difficulty     INTEGER,
        writes         BOOLEAN,
        min_tool_calls INTEGER,
        gold_calls     INTEGER,
        PRIMARY KEY (task_id, variation)
    );
    """,
    # 7: event payloads ZSTD-compressed (11 KiB of JSON per run, mostly header lists, shrinks ~9x); same columns
    """
    CREATE TABLE events_zstd (
        run_id    VARCHAR NOT NULL,
        seq       BIGINT NOT NULL,
        kind      VARCHAR NOT NULL,
        wall_time TIMESTAMPTZ NOT NULL,
        mono_ns   BIGINT NOT NULL,
        actor     VARCHAR,
        upstream  VARCHAR,
        payload   JSON NOT NULL USING COMPRESSION zstd
    );
    INSERT INTO events_zstd SELECT run_id, seq, kind, wall_time, mono_ns, actor, upstream, payload FROM events;
    DROP TABLE events;
    ALTER TABLE events_zstd RENAME TO events;
    """,
    # 8: large bodies kept in side files next to the log (fae/store/bodies.py): their rows hold no data
    """
    ALTER TABLE blobs ADD COLUMN external BOOLEAN DEFAULT false;
    """,
    # 9: what a judge found of a run under no rule (fae/judge/facts.py), so a rejudge under new rules need not
    # read the run again
    """
    CREATE TABLE judge_facts (
        run_id       VARCHAR NOT NULL,
        judge        VARCHAR NOT NULL,
        inputs       VARCHAR NOT NULL,
        code_version VARCHAR NOT NULL,
        facts        JSON NOT NULL
    );
    """,
)

LATEST_VERSION = len(MIGRATIONS)

VIEWS: dict[str, str] = {
    "batch_status": """
        SELECT v.batch, b.kind, b.started_at, b.completed_at,
               CASE WHEN b.batch IS NULL THEN NULL ELSE b.completed_at IS NOT NULL END AS complete,
               b.planned_runs, count(DISTINCT v.run_id) AS judged_runs, count(*) AS verdicts
        FROM verdicts v LEFT JOIN verdict_batches b USING (batch)
        GROUP BY ALL
        UNION ALL
        SELECT b.batch, b.kind, b.started_at, b.completed_at, b.completed_at IS NOT NULL,
               b.planned_runs, 0, 0
        FROM verdict_batches b WHERE NOT EXISTS (SELECT 1 FROM verdicts v WHERE v.batch = b.batch)
    """,
    "fhir_exchanges": """
        SELECT e.run_id, e.seq, e.wall_time, e.actor,
               f.payload->>'$.interaction'   AS interaction,
               f.payload->>'$.resource_type' AS resource_type,
               f.payload->>'$.resource_id'   AS resource_id,
               f.payload->>'$.version'       AS version,
               CAST(f.payload->>'$.status' AS INTEGER) AS status,
               e.payload->>'$.method'        AS method,
               e.payload->>'$.path'          AS path,
               CAST(e.payload->>'$.duration_ms' AS DOUBLE) AS duration_ms,
               e.payload->>'$.error'         AS error,
               CAST(f.payload->'$.search_ids' AS VARCHAR[]) AS search_ids,
               e.payload->>'$.exchange_id'   AS exchange_id
        FROM events e
        JOIN events f
          ON f.run_id = e.run_id AND f.kind = 'FhirInteracted'
         AND f.payload->>'$.exchange_id' = e.payload->>'$.exchange_id'
        WHERE e.kind = 'HttpExchanged'
    """,
    "llm_calls": f"""
        SELECT l.run_id, l.seq, l.wall_time, l.actor,
               l.payload->>'$.api'    AS api,
               l.payload->>'$.model'  AS model,
               CAST(l.payload->>'$.stream' AS BOOLEAN) AS stream,
               coalesce(CAST(l.payload->>'$.message_count' AS INTEGER),
                        json_array_length(l.payload->'$.messages')) AS message_count,
               json_array_length(l.payload->'$.tool_calls') AS tool_call_count,
               l.payload->>'$.finish_reason' AS finish_reason,
               CAST(l.payload->>'$.prompt_tokens' AS BIGINT)     AS prompt_tokens,
               CAST(l.payload->>'$.completion_tokens' AS BIGINT) AS completion_tokens,
               CAST(l.payload->>'$.total_tokens' AS BIGINT)      AS total_tokens,
               CAST(l.payload->>'$.cache_read_tokens' AS BIGINT)  AS cache_read_tokens,
               CAST(l.payload->>'$.cache_write_tokens' AS BIGINT) AS cache_write_tokens,
               (SELECT {CALL_KNOWN} FROM (SELECT {usage_columns("u")}
                                          FROM (SELECT json_extract_string(l.payload, {usage_paths()}) AS u)))
                   AS tokens_known,
               CAST(l.payload->>'$.status' AS INTEGER) AS status,
               l.payload->>'$.error' AS error,
               h.duration_ms
        FROM events l
        LEFT JOIN (SELECT run_id, payload->>'$.exchange_id' AS exchange_id,
                          CAST(payload->>'$.duration_ms' AS DOUBLE) AS duration_ms
                   FROM events WHERE kind = 'HttpExchanged') h
          ON h.run_id = l.run_id AND h.exchange_id = l.payload->>'$.exchange_id'
        WHERE l.kind = 'LlmCalled'
    """,
    "tool_calls": """
        SELECT run_id, seq, wall_time, actor,
               payload->>'$.tool'  AS tool,
               payload->'$.arguments' AS arguments,
               payload->'$.result'    AS result,
               CAST(payload->>'$.is_error' AS BOOLEAN) AS is_error,
               payload->>'$.error' AS error
        FROM events WHERE kind = 'ToolCalled'
    """,
    "run_summary": f"""
        SELECT r.run_id, r.task_id, r.variation, r.agent, r.repeat, r.status, r.stop_reason,
               r.started_at, r.ended_at,
               epoch_ms(r.ended_at) - epoch_ms(r.started_at) AS duration_ms,
               (SELECT count(*) FROM events e WHERE e.run_id = r.run_id) AS events,
               (SELECT count(*) FROM events e WHERE e.run_id = r.run_id
                 AND e.kind = 'FhirInteracted') AS fhir_exchanges,
               (SELECT count(*) FROM events e WHERE e.run_id = r.run_id AND e.kind = 'LlmCalled'
                 AND e.actor = 'agent') AS llm_calls,
               (SELECT count(*) FROM events e WHERE e.run_id = r.run_id AND e.kind = 'ToolCalled'
                 AND e.actor = 'agent') AS tool_calls,
               (SELECT {run_sum(CALL_TOTAL)}  -- 0 with no call, NULL with one of unknown tokens, never a part
                FROM (SELECT {usage_columns("u")}
                      FROM (SELECT json_extract_string(e.payload, {usage_paths()}) AS u FROM events e
                            WHERE e.run_id = r.run_id AND e.kind = 'LlmCalled' AND e.actor = 'agent'))) AS total_tokens,
               (SELECT e.payload->>'$.text' FROM events e
                 WHERE e.run_id = r.run_id AND e.kind = 'AnswerGiven' ORDER BY e.seq DESC LIMIT 1) AS answer
        FROM runs r
    """,
}

VIEWS.update(STUDY_VIEWS)
