"""Study tables computed in Python from small SQL aggregates: pass^k / pass@k, bootstrap CIs, paired tests."""

from __future__ import annotations

from collections import defaultdict

from fae.report.estimators import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    bootstrap_mean_ci,
    mcnemar_exact,
    paired_bootstrap_cis,
    pass_curves,
)
from fae.report.scope import KEYS, Queryable, Scope, Table, literal


def pass_k(log: Queryable, scope: Scope) -> Table:
    sql = f"""
WITH {scope.cte()}
SELECT {KEYS}, task_id, variation, count(*) AS trials, count(*) FILTER (WHERE strict) AS successes
FROM scope WHERE strict IS NOT NULL GROUP BY ALL ORDER BY ALL"""
    _, rows = log.query(sql)
    units: dict[tuple, list[tuple[int, int]]] = defaultdict(list)
    for experiment, phase, configuration, _task, _variation, trials, successes in rows:
        units[(experiment, phase, configuration)].append((int(trials), int(successes)))
    out = [(*key, k, count, hat, at) for key, found in units.items() for k, count, hat, at in pass_curves(found)]
    return Table(
        "pass_k",
        "pass^k and pass@k (strict) for k = 1..trials",
        sql.strip(),
        ["experiment", "phase", "configuration", "k", "prompts", "pass_hat_k", "pass_at_k"],
        out,
        "Per prompt (task variation) with n trials and c passes: pass^k = C(c,k)/C(n,k), "
        "pass@k = 1 - C(n-c,k)/C(n,k); averaged over prompts with n >= k (tau2-bench's estimators).",
        {"pass_hat_k": "{:.3f}", "pass_at_k": "{:.3f}"},
    )


def success_ci(log: Queryable, scope: Scope) -> Table:
    sql = f"""
WITH {scope.cte()}
SELECT {KEYS}, task_id, 100 * avg(CAST(strict AS INTEGER)) AS strict_pct,
       100 * avg(CAST(light AS INTEGER)) AS light_pct
FROM scope WHERE strict IS NOT NULL GROUP BY ALL ORDER BY ALL"""
    _, rows = log.query(sql)
    tasks: dict[tuple, list[tuple[float, float | None]]] = defaultdict(list)
    for experiment, phase, configuration, _task, strict_pct, light_pct in rows:
        tasks[(experiment, phase, configuration)].append((float(strict_pct), light_pct))
    out = []
    for key, values in tasks.items():
        strict = [s for s, _ in values]
        light = [float(v) for _, v in values if v is not None]
        out.append(
            (
                *key,
                len(values),
                sum(strict) / len(strict),
                *bootstrap_mean_ci(strict),
                sum(light) / len(light) if light else None,
                *bootstrap_mean_ci(light),
            )
        )
    return Table(
        "success_ci",
        "Success rate (%) with 95 % bootstrap CIs over tasks",
        sql.strip(),
        [
            "experiment",
            "phase",
            "configuration",
            "tasks",
            "strict",
            "strict_low",
            "strict_high",
            "light",
            "light_low",
            "light_high",
        ],
        out,
        f"Mean over tasks of each task's success rate; percentile bootstrap resampling tasks "
        f"({BOOTSTRAP_RESAMPLES} resamples, numpy default_rng({BOOTSTRAP_SEED})).",
        {c: "{:.1f}" for c in ("strict", "strict_low", "strict_high", "light", "light_low", "light_high")},
    )


def paired(log: Queryable, scope: Scope, pairs: list[tuple[str, str]] | None = None) -> Table:
    chosen = ""
    if pairs:
        chosen = (
            " AND ("
            + " OR ".join(f"(x.configuration = {literal(a)} AND y.configuration = {literal(b)})" for a, b in pairs)
            + ")"
        )
    else:
        chosen = " AND x.configuration < y.configuration"
    sql = f"""
WITH {scope.cte()},
scored AS (SELECT * FROM scope WHERE strict IS NOT NULL)
SELECT x.experiment, x.phase, x.configuration AS a, y.configuration AS b, x.task_id, x.variation,
       count(*) FILTER (WHERE x.strict AND y.strict) AS both,
       count(*) FILTER (WHERE x.strict AND NOT y.strict) AS only_a,
       count(*) FILTER (WHERE NOT x.strict AND y.strict) AS only_b,
       count(*) FILTER (WHERE NOT x.strict AND NOT y.strict) AS neither
FROM scored x JOIN scored y
  ON coalesce(x.experiment, '') = coalesce(y.experiment, '') AND coalesce(x.phase, '') = coalesce(y.phase, '')
 AND x.task_id = y.task_id AND x.variation = y.variation AND x.trial = y.trial{chosen}
GROUP BY ALL ORDER BY ALL"""
    _, rows = log.query(sql)
    clusters: dict[tuple, list[tuple[int, int, int, int]]] = defaultdict(list)
    for experiment, phase, a, b, _task, _variation, both, only_a, only_b, neither in rows:
        clusters[(experiment, phase, a, b)].append((int(both), int(only_a), int(only_b), int(neither)))
    intervals = paired_bootstrap_cis([[(c[2] - c[1], sum(c)) for c in found] for found in clusters.values()])
    out = []
    for ((experiment, phase, a, b), found), (low, high) in zip(clusters.items(), intervals, strict=True):
        both, only_a, only_b, neither = (sum(c[i] for c in found) for i in range(4))
        n = both + only_a + only_b + neither
        out.append(
            (
                experiment,
                phase,
                a,
                b,
                n,
                both,
                only_a,
                only_b,
                neither,
                100 * (only_b - only_a) / n,
                100 * low,
                100 * high,
                mcnemar_exact(only_a, only_b),
            )
        )
    return Table(
        "paired",
        "Paired comparison of configurations on the same task variations and trials",
        sql.strip(),
        [
            "experiment",
            "phase",
            "a",
            "b",
            "pairs",
            "both",
            "only_a",
            "only_b",
            "neither",
            "diff_pp",
            "diff_low",
            "diff_high",
            "mcnemar_p",
        ],
        out,
        "Pairs: the same (task, variation, trial) run by a and by b. diff = success(b) - success(a) "
        "in points; CI: bootstrap resampling task variations with their pairs; p: exact McNemar "
        "(two-sided binomial test of only_a vs only_b).",
        {"diff_pp": "{:+.1f}", "diff_low": "{:+.1f}", "diff_high": "{:+.1f}", "mcnemar_p": "{:.4f}"},
    )
