"""Pure estimators the study needs beyond SQL aggregates: pass^k, pass@k, bootstrap CIs, exact McNemar."""

from __future__ import annotations

from collections.abc import Sequence
from math import comb

import numpy as np

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0


def pass_hat_k(trials: int, successes: int, k: int) -> float:
    """Chance that k trials drawn without replacement all succeed: C(c,k)/C(n,k) (tau2-bench's pass^k)."""
    return comb(successes, k) / comb(trials, k)


def pass_at_k(trials: int, successes: int, k: int) -> float:
    """Chance that at least one of k trials drawn without replacement succeeds: 1 - C(n-c,k)/C(n,k)."""
    return 1.0 - comb(trials - successes, k) / comb(trials, k)


def pass_curves(units: Sequence[tuple[int, int]]) -> list[tuple[int, int, float, float]]:
    """(k, units, mean pass^k, mean pass@k) for k = 1..max trials; a unit counts for k <= its trials."""
    top = max((n for n, _ in units), default=0)
    curves = []
    for k in range(1, top + 1):
        eligible = [(n, c) for n, c in units if n >= k]
        curves.append(
            (
                k,
                len(eligible),
                sum(pass_hat_k(n, c, k) for n, c in eligible) / len(eligible),
                sum(pass_at_k(n, c, k) for n, c in eligible) / len(eligible),
            )
        )
    return curves


def bootstrap_mean_ci(
    values: Sequence[float], *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED, level: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean of ``values`` (one per task), seeded so it is repeatable."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(resamples, data.size))].mean(axis=1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def paired_bootstrap_cis(
    groups: Sequence[Sequence[tuple[float, float]]],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    level: float = 0.95,
) -> list[tuple[float, float]]:
    """Per group of clusters: the CI of mean(b) - mean(a), resampling whole clusters together.

    A cluster is a task variation's paired trials: (sum of differences b - a over its pairs, number of
    pairs). The draws depend only on the number of clusters and the seed, so groups of one size (every pair of
    configurations over the same task variations) share one set of draws and one matrix product.
    """
    found: list[tuple[float, float]] = [(float("nan"), float("nan"))] * len(groups)
    sizes: dict[int, list[int]] = {}
    for index, clusters in enumerate(groups):
        if clusters:
            sizes.setdefault(len(clusters), []).append(index)
    tail = (1 - level) / 2 * 100
    for n, indices in sizes.items():
        rng = np.random.default_rng(seed)
        picks = rng.integers(0, n, size=(resamples, n))
        # how often each resample drew each cluster, then every group's two sums at once as one matrix product
        counts = np.bincount((picks + n * np.arange(resamples)[:, None]).ravel(), minlength=resamples * n)
        data = np.hstack([np.asarray(groups[i], dtype=float).reshape(-1, 2) for i in indices])
        sums = counts.reshape(resamples, n).astype(float) @ data
        diffs = sums[:, 0::2] / sums[:, 1::2]
        lows, highs = np.percentile(diffs, [tail, 100 - tail], axis=0)
        for column, index in enumerate(indices):
            found[index] = (float(lows[column]), float(highs[column]))
    return found


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value: 2 * P(X <= min(b, c)) for X ~ Binomial(b + c, 1/2), capped at 1."""
    discordant = only_a + only_b
    if discordant == 0:
        return 1.0
    low = min(only_a, only_b)
    term, total = 1, 1  # C(n, 0); each next term from the last: C(n, i+1) = C(n, i) (n - i) / (i + 1)
    for i in range(low):
        term = term * (discordant - i) // (i + 1)
        total += term
    return min(1.0, 2 * (total / 2**discordant))
