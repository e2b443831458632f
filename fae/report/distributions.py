"""The report's distribution figures as data: one SQL aggregate each, so no run's row is pulled into Python.

A box is its quartiles and Tukey whiskers (exact, as matplotlib's boxplot computes them). A violin is its
extremes, median, variance and the values themselves up to GRID of them; above that, GRID quantiles at fixed
evenly spaced levels stand in for the values (deterministic; the drawn density moves by under 1 % of its
peak on the 100k-run bench log).
"""

from __future__ import annotations

from dataclasses import dataclass

from fae.report.scope import KEYS, Queryable
from fae.report.study import Study

GRID = 1024


@dataclass(frozen=True)
class Spread:
    """One box or violin: a configuration's values (within one split value)."""

    key: tuple  # (experiment, phase, configuration)
    split: str  # the split's value as text ("" when the figure has no split)
    runs: int
    q1: float
    median: float
    q3: float
    whisker_low: float  # the farthest values within 1.5 IQR of the box (never inside it: matplotlib's rule)
    whisker_high: float
    low: float  # the extremes
    high: float
    mean: float | None = None  # violins only: the mean, the sample variance (the kernel's bandwidth) ...
    variance: float | None = None
    points: tuple[float, ...] = ()  # ... and every value (runs <= GRID), else GRID evenly spaced quantiles


@dataclass(frozen=True)
class Distribution:
    """A figure of boxes or violins: per configuration, and per split value where ``split`` names one."""

    name: str
    title: str
    sql: str
    ylabel: str
    split: str | None
    violin: bool
    spreads: list[Spread]
    order: tuple[str, ...] = ()
    """The split values in the order drawn (others after them, sorted)."""


def distribution(
    log: Queryable,
    study: Study,
    column: str,
    by: tuple[str, str] | None,
    name: str,
    title: str,
    ylabel: str,
    violin: bool,
    where: str = "",
    data_sql: str = "",
    order: tuple[str, ...] = (),
) -> Distribution | None:
    """Boxes (or violins) of ``column`` per configuration, split by ``by`` = (SQL expression, its name); or of
    ``data_sql``, a query over ``scope`` of (KEYS, split, value) (then ``by`` only names the split)."""
    split = by[0] if by else "''"
    where = f"\n         WHERE {where}" if where else ""
    data = (
        f"({data_sql})"
        if data_sql
        else f"(SELECT {KEYS}, {split} AS split, CAST(coalesce({column}, 0) AS DOUBLE) AS value FROM scope{where})"
    )
    shape = ""
    if violin:
        shape = (
            f",\n       avg(value) AS mean, var_samp(value) AS variance,\n"
            f"       coalesce(list(value ORDER BY value) FILTER (WHERE runs <= {GRID}),\n"
            f"                quantile_cont(value, [(i + 0.5) / {GRID} FOR i IN range({GRID})])"
            f" FILTER (WHERE runs > {GRID})) AS points"
        )
    sql = f"""WITH {study.scope.cte()},
data AS {data},
quartiles AS (SELECT *, quantile_cont(value, [0.25, 0.5, 0.75]) OVER spread AS q, count(*) OVER spread AS runs
              FROM data WINDOW spread AS (PARTITION BY {KEYS}, split))
SELECT {KEYS}, split, runs, q[1] AS q1, q[2] AS median, q[3] AS q3,
       min(value) FILTER (WHERE value >= q[1] - 1.5 * (q[3] - q[1])) AS whisker_low,
       max(value) FILTER (WHERE value <= q[3] + 1.5 * (q[3] - q[1])) AS whisker_high,
       min(value) AS low, max(value) AS high{shape}
FROM quartiles GROUP BY {KEYS}, split, runs, q ORDER BY {KEYS}, split"""
    _, rows = log.query(sql)
    if not rows:
        return None
    spreads = []
    for row in rows:
        experiment, phase, configuration, value, runs, q1, median, q3, whisker_low, whisker_high, low, high = row[:12]
        shape_of = {"mean": row[12], "variance": row[13], "points": tuple(row[14])} if violin else {}
        spreads.append(
            Spread(
                (experiment, phase, configuration),
                str(value) if by else "",
                runs,
                q1,
                median,
                q3,
                q1 if whisker_low is None or whisker_low > q1 else whisker_low,
                q3 if whisker_high is None or whisker_high < q3 else whisker_high,
                low,
                high,
                **shape_of,
            )
        )
    return Distribution(name, title, sql, ylabel, by[1] if by else None, violin, spreads, order)


# fig. 9: per configuration, the reference paper's five distributions of tool calls per task
CALLS = (
    "calls, passed",
    "calls, failed",
    "errors, passed",
    "errors, failed",
    "expected, solved",
)
CALL_ROWS = f"""SELECT {KEYS}, '{CALLS[0]}' AS split, CAST(tool_calls AS DOUBLE) AS value FROM scope WHERE strict
    UNION ALL SELECT {KEYS}, '{CALLS[1]}', tool_calls FROM scope WHERE NOT strict
    UNION ALL SELECT {KEYS}, '{CALLS[2]}', tool_errors FROM scope WHERE strict
    UNION ALL SELECT {KEYS}, '{CALLS[3]}', tool_errors FROM scope WHERE NOT strict
    UNION ALL SELECT {KEYS}, '{CALLS[4]}', gold_calls  -- each task variation the configuration solved, once
    FROM (SELECT DISTINCT {KEYS}, task_id, variation, gold_calls FROM scope WHERE strict AND gold_calls IS NOT NULL)"""
OUTCOMES = ("strict success", "strict failure", "light success", "light failure")
OUTCOME_ROWS = f"""SELECT {KEYS}, CASE WHEN strict THEN '{OUTCOMES[0]}' ELSE '{OUTCOMES[1]}' END AS split,
           CAST(total_tokens AS DOUBLE) AS value FROM scope WHERE strict IS NOT NULL AND total_tokens IS NOT NULL
    UNION ALL SELECT {KEYS}, CASE WHEN light THEN '{OUTCOMES[2]}' ELSE '{OUTCOMES[3]}' END, total_tokens
    FROM scope WHERE light IS NOT NULL AND total_tokens IS NOT NULL"""
BUCKET = "CASE WHEN gold_calls >= 5 THEN '5+' ELSE CAST(gold_calls AS VARCHAR) END"
# fig. 12: a CV per prompt (its trials) and per task (all its runs), over runs whose tokens are known
CV = "stddev_samp(total_tokens) / nullif(avg(total_tokens), 0)"
CV_ROWS = f"""SELECT * FROM (
        SELECT {KEYS}, 'same prompt' AS split, {CV} AS value FROM scope WHERE total_tokens IS NOT NULL
        GROUP BY {KEYS}, task_id, variation HAVING count(*) > 1
        UNION ALL
        SELECT {KEYS}, 'within task', {CV} FROM scope WHERE total_tokens IS NOT NULL
        GROUP BY {KEYS}, task_id HAVING count(*) > 1) WHERE value IS NOT NULL"""


def all_distributions(log: Queryable, study: Study) -> dict[str, Distribution]:
    """The report's distribution figures, by name (absent where no run has a value)."""
    known = "total_tokens IS NOT NULL"  # a run whose tokens are unknown is left out, never drawn as 0
    found = [
        distribution(
            log,
            study,
            "",
            ("", ""),
            "fig-calls",
            "Tool calls per run: total and erroneous, in passed and failed runs, and the gold plan's "
            "calls of each task variation solved (paper fig. 9)",
            "tool calls",
            True,
            data_sql=CALL_ROWS,
            order=CALLS,
        ),  # fmt: skip
        distribution(
            log,
            study,
            "tool_calls - gold_calls",
            ("CASE WHEN strict THEN 'pass' ELSE 'fail' END", "outcome"),
            "fig-calls-excess",
            "Tool calls per run beyond the gold plan's, by outcome",
            "tool calls − expected",
            False,
            "strict IS NOT NULL AND gold_calls IS NOT NULL",
        ),
        distribution(
            log,
            study,
            "total_tokens",
            None,
            "fig-tokens",
            "Agent tokens per run (paper fig. 10)",
            "tokens",
            True,
            known,
        ),  # fmt: skip
        distribution(
            log,
            study,
            "total_tokens",
            ("CAST(difficulty AS VARCHAR)", "difficulty"),
            "fig-tokens-difficulty",
            "Agent tokens per run by task difficulty (paper fig. 11a)",
            "tokens",
            True,
            f"difficulty IS NOT NULL AND {known}",
        ),  # fmt: skip
        distribution(
            log,
            study,
            "",
            ("", ""),
            "fig-tokens-outcome",
            "Agent tokens per run by outcome, strict and light (paper fig. 11b)",
            "tokens",
            True,
            data_sql=OUTCOME_ROWS,
            order=OUTCOMES,
        ),  # fmt: skip
        distribution(
            log,
            study,
            "total_tokens",
            (BUCKET, "expected calls"),
            "fig-tokens-calls",
            "Agent tokens per run by the gold plan's tool calls, 5 and more together (paper fig. 11c)",
            "tokens",
            True,
            f"gold_calls IS NOT NULL AND {known}",
            order=("1", "2", "3", "4", "5+"),
        ),  # fmt: skip
        distribution(
            log,
            study,
            "",
            ("", ""),
            "fig-token-cv",
            "Token coefficient of variation: over a prompt's trials and over a task's runs, "
            "with the overall CV as a line (paper fig. 12)",
            "coefficient of variation (std / mean)",
            True,
            data_sql=CV_ROWS,
            order=("same prompt", "within task"),
        ),  # fmt: skip
    ]
    return {d.name: d for d in found if d is not None}
