"""What the agents' LLM calls cost per run, per configuration and per successful run, and the Pareto front of
success against cost (as agent leaderboards draw it). docs/study.md, "Cost", gives the formulas.

The price table is fae's dated list prices, overridden by ``--prices FILE`` and ``--price``
(``fae.report.prices``); it goes into the SQL as a VALUES list, so the SQL under the table runs as it is.
A call to a model the table does not price, or whose tokens are unknown, gives its run, and the run's
configuration, no cost at all: "no price" or "unknown tokens", never a part-sum and never zero.
"""

from __future__ import annotations

from fae.report.prices import PriceTable
from fae.report.scope import KEYS, Queryable, Scope, Table, literal, run_sql

SNAPSHOT = r"-(\d{4}-\d{2}-\d{2}|\d{8})$"
"""A model name's trailing date snapshot (gpt-4.1-mini-2025-04-14, claude-sonnet-4-20250514)."""


def _number(value: float | None) -> str:
    return "NULL" if value is None else repr(float(value))


def _values(prices: PriceTable) -> str:
    rows = [
        f"({literal(model)}, {_number(p.input)}, {_number(p.output)}, {_number(p.cached_input)}, "
        f"{_number(p.cache_write)})"
        for model, p in sorted(prices.models.items())
    ]
    # a typed row that matches no model keeps the column types when the table is empty
    return ", ".join(rows or ["(NULL, NULL, NULL, NULL, NULL)"])


def cost_sql(scope: Scope, prices: PriceTable) -> str:
    """Per configuration: the cost of its runs, per run and per strict success, and whether it is on the front."""
    return f"""
WITH {scope.cte()},
price(model, usd_in, usd_out, usd_cached, usd_cache_write) AS (VALUES {_values(prices)}),
usage AS (  -- the agent's LLM calls of the runs in scope, per run and model, each priced by the model's name
            -- as it is, else without its date snapshot
    SELECT u.*, p.model AS priced_as, p.usd_in, p.usd_out, p.usd_cached, p.usd_cache_write
    FROM llm_usage u
    LEFT JOIN price p ON p.model = CASE WHEN u.model IN (SELECT model FROM price) THEN u.model
                                        ELSE regexp_replace(u.model, '{SNAPSHOT}', '') END
    WHERE u.run_id IN (SELECT run_id FROM scope)
),
run_cost AS (
    SELECT run_id, sum(calls) AS calls,
           sum(calls) FILTER (WHERE priced_as IS NULL) AS unpriced_calls,
           sum(unknown_calls) AS unknown_token_calls,
           list(DISTINCT model ORDER BY model) FILTER (WHERE priced_as IS NULL) AS unpriced_models,
           sum((prompt_tokens - coalesce(cache_read_tokens, 0) - coalesce(cache_write_tokens, 0)) * usd_in
               + coalesce(cache_read_tokens, 0) * coalesce(usd_cached, usd_in)
               + coalesce(cache_write_tokens, 0) * coalesce(usd_cache_write, usd_in)
               + completion_tokens * usd_out) / 1e6 AS usd
    FROM usage GROUP BY run_id
),
per_run AS (  -- a run with no LLM call spent nothing; one with an unpriced or unknown call has no cost
    SELECT {KEYS}, s.strict, coalesce(c.calls, 0) AS calls,
           CASE WHEN coalesce(c.unpriced_calls, 0) = 0 AND coalesce(c.unknown_token_calls, 0) = 0
                THEN coalesce(c.usd, 0) END AS usd,
           coalesce(c.unpriced_calls, 0) AS unpriced_calls, coalesce(c.unknown_token_calls, 0) AS unknown_token_calls,
           coalesce(c.unpriced_models, []) AS unpriced_models
    FROM scope s LEFT JOIN run_cost c USING (run_id)
),
configuration AS (
    SELECT {KEYS}, count(*) AS runs, count(*) FILTER (WHERE strict) AS successes,
           100 * avg(CAST(strict AS INTEGER)) AS success_pct,
           CASE WHEN bool_and(usd IS NOT NULL) THEN sum(usd) END AS usd,
           sum(calls) AS calls, sum(unpriced_calls) AS unpriced_calls,
           sum(unknown_token_calls) AS unknown_token_calls,
           list_sort(list_distinct(flatten(list(unpriced_models)))) AS unpriced_models
    FROM per_run GROUP BY ALL
),
costed AS (
    SELECT *, usd / runs AS usd_per_run, usd / nullif(successes, 0) AS usd_per_success FROM configuration
)
SELECT {KEYS}, runs, successes, success_pct, usd, usd_per_run, usd_per_success,
       CASE WHEN usd IS NOT NULL THEN CASE WHEN calls > 0 THEN 'listed' ELSE 'no LLM calls' END
            ELSE concat_ws('; ', CASE WHEN unpriced_calls > 0
                                      THEN 'no price: ' || array_to_string(unpriced_models, ', ') END,
                                 CASE WHEN unknown_token_calls > 0
                                      THEN 'unknown tokens: ' || unknown_token_calls
                                           || CASE WHEN unknown_token_calls = 1 THEN ' call' ELSE ' calls' END
                                      END) END AS price,
       -- on the Pareto front: no configuration of its experiment and phase costs as little or less per run
       -- and succeeds as often or more, and one of the two strictly
       CASE WHEN usd IS NOT NULL AND success_pct IS NOT NULL THEN NOT EXISTS (
           SELECT 1 FROM costed o
           WHERE o.experiment IS NOT DISTINCT FROM c.experiment AND o.phase IS NOT DISTINCT FROM c.phase
             AND o.usd IS NOT NULL AND o.success_pct IS NOT NULL
             AND o.usd_per_run <= c.usd_per_run AND o.success_pct >= c.success_pct
             AND (o.usd_per_run < c.usd_per_run OR o.success_pct > c.success_pct)) END AS pareto
FROM costed c ORDER BY ALL"""


def cost(log: Queryable, scope: Scope, prices: PriceTable) -> Table:
    return run_sql(
        log,
        "cost",
        "Cost of the agents' LLM calls (USD): per run, per successful run, and the Pareto front",
        cost_sql(scope, prices),
        "Prices: " + "; then ".join(prices.origin) + ". A call costs (uncached prompt × input + cache reads × "
        "cached input + cache writes × cache write + completion × output) / 10⁶, each price per million tokens "
        "(a missing cached or cache-write price: the input price); a model's name is looked up as it is, then "
        "without its date snapshot. usd = Σ over the counted runs (a spec's latest attempt, failed runs too); per "
        "run = usd / runs; per success = usd / strict passes. price: 'listed', or why there is no cost: a model "
        "with no price, tokens unknown (usd is then empty, never 0). pareto: no other configuration is as cheap "
        "per run and as successful, and better at one. Prices change: --prices FILE, --price MODEL=IN/OUT[/CACHED].",
        {"success_pct": "{:.1f}", "usd": "{:.4f}", "usd_per_run": "{:.5f}", "usd_per_success": "{:.5f}"},
    )
