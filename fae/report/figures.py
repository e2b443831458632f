"""The report's figures: matplotlib drawn to inline SVG from the study's tables (no pyplot, no global state)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import fields, replace
from typing import Any, cast

import matplotlib
import numpy as np
from matplotlib import cbook
from matplotlib.axes import Axes
from matplotlib.collections import PolyCollection

from fae.report import figures_paper as paper
from fae.report.distributions import GRID, Distribution, Spread
from fae.report.figure_cost import cost_front
from fae.report.plotting import (
    COLORS,
    STYLE,
    bars,
    from_zero,
    label_of,
    labels_of,
    legend,
    new_figure,
    say_empty,
    short_name,
    svg,
    tick,
)
from fae.report.scope import FIGURES, Figure, Table
from fae.report.study import Study
from fae.util.visible import visible


def success_by(study: Study, slice_name: str) -> Figure | None:
    table = study["success"]
    rows = [r for r in table.dicts() if r["slice"] == slice_name]
    if not rows:
        return None
    single, _ = labels_of(table, study.shared_model)
    configs = list(dict.fromkeys(label_of(r, single, study.shared_model) for r in rows))
    values = sorted({r["value"] for r in rows})
    fig, ax = new_figure(max(4.5, 0.9 * len(values) * max(1, len(configs)) * 0.5 + 2))
    width = 0.8 / len(configs)
    for c, config in enumerate(configs):
        found = {r["value"]: r for r in rows if label_of(r, single, study.shared_model) == config}
        bars(
            ax,
            [i + c * width - 0.4 + width / 2 for i in range(len(values))],
            [found[v]["strict_mean"] if v in found else 0 for v in values],
            width,
            COLORS[c % len(COLORS)],
            yerr=[(found[v]["strict_std"] or 0) if v in found else 0 for v in values],
            capsize=2,
            label=config.replace("\n", " "),
        )
    tick(ax, [str(v) for v in values])
    ax.set_xlabel(slice_name)
    ax.set_ylabel("strict success (%)")
    ax.set_ylim(0, 105)
    say_empty(ax, [r["strict_mean"] for r in rows])
    legend(ax)
    return Figure(
        f"fig-success-{slice_name}", f"Strict success by {slice_name}, mean ± std over trials", table.sql, svg(fig)
    )


def pass_curves(study: Study) -> Figure | None:
    table = study["pass_k"]
    rows = table.dicts()
    if not rows:
        return None
    single, _ = labels_of(table, study.shared_model)
    series: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        series[label_of(r, single, study.shared_model)].append(r)
    fig, ax = new_figure(5.5)
    one_k = len({r["k"] for r in rows}) == 1  # then the series sit side by side around k, not on one point
    for c, (config, found) in enumerate(series.items()):
        color = COLORS[c % len(COLORS)]
        ks = [r["k"] + (0.04 * (c - (len(series) - 1) / 2) if one_k else 0) for r in found]
        ax.plot(ks, [r["pass_hat_k"] for r in found], "-o", color=color, label=f"{config.replace(chr(10), ' ')} pass^k")
        ax.plot(ks, [r["pass_at_k"] for r in found], "--x", color=color, alpha=0.6)  # x: seen for one k too
    ax.set_xlabel("k")
    ax.set_ylabel("pass^k (solid), pass@k (dashed)")
    ax.set_ylim(0, 1.05)
    ax.set_xticks(sorted({r["k"] for r in rows}))
    legend(ax)
    return Figure("fig-pass-k", "pass^k and pass@k curves (strict)", table.sql, svg(fig))


def variance_bars(study: Study) -> Figure | None:
    table = study["variance"]
    rows = table.dicts()
    if not rows:
        return None
    single, labels = labels_of(table, study.shared_model)
    fig, ax = new_figure(max(4.5, 1.2 * len(rows)))
    bottom = [0.0] * len(rows)
    for c, (column, name) in enumerate(
        (
            ("between_task_pp2", "between tasks"),
            ("within_task_pp2", "within task (variations)"),
            ("same_prompt_pp2", "same prompt (run to run)"),
        )
    ):
        values = [r[column] or 0 for r in rows]
        ax.bar(range(len(rows)), values, 0.6, bottom=bottom, color=COLORS[c], label=name)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    tick(ax, labels)
    ax.set_ylabel("variance (pp²)")
    from_zero(ax)
    say_empty(ax, [r["total_pp2"] for r in rows])
    legend(ax)
    return Figure(
        "fig-variance", "Variance components of the strict outcome in pp² (paper fig. 6b)", table.sql, svg(fig)
    )


def _violin_stats(spread: Spread) -> dict[str, Any]:
    """What matplotlib's violin draws: its own Gaussian KDE of the values, or (GRID quantiles) the same
    kernel and bandwidth over the quantiles, each weighing the same share of the runs."""
    if spread.runs <= GRID:
        return cbook.violin_stats([np.asarray(spread.points)], ("GaussianKDE", "scott"))[0]
    coords = np.linspace(spread.low, spread.high, 100)
    bandwidth2 = (spread.variance or 0.0) * spread.runs ** (-2 / 5)  # Scott's factor, squared, times the variance
    grid = np.asarray(spread.points)
    vals = np.exp(-((coords[:, None] - grid[None, :]) ** 2) / (2 * bandwidth2)).mean(axis=1)
    return {
        "coords": coords,
        "vals": vals / np.sqrt(2 * np.pi * bandwidth2),
        "mean": spread.mean,
        "median": spread.median,
        "min": spread.low,
        "max": spread.high,
        "quantiles": np.array([]),
    }


def _box_stats(spread: Spread) -> dict[str, Any]:
    return {
        "q1": spread.q1,
        "med": spread.median,
        "q3": spread.q3,
        "whislo": spread.whisker_low,
        "whishi": spread.whisker_high,
    }


def _violins(ax: Axes, positions: list[float], data: list[Spread], width: float, color: str) -> None:
    """A violin per spread, its median marked; a spread of one value is a line at it."""
    shaped = [(p, s) for p, s in zip(positions, data, strict=True) if s.low < s.high]
    if shaped:
        parts = ax.violin(
            [_violin_stats(s) for _, s in shaped],
            positions=[p for p, _ in shaped],
            widths=width * 0.9,
            showmedians=True,
        )
        # matplotlib's stubs say one Collection; at run time "bodies" is each violin's PolyCollection
        for body in cast("list[PolyCollection]", parts["bodies"]):
            body.set_facecolor(color)
            body.set_edgecolor(color)
            body.set_alpha(0.55)
        for line in ("cbars", "cmins", "cmaxes"):
            parts[line].set_color(color)
        parts["cmedians"].set_color("black")  # the median marked, as the paper's violins mark it
        parts["cmedians"].set_linewidth(2)
    for p, s in zip(positions, data, strict=True):
        if s.low == s.high:  # every value the same: the violin is a line at it
            ax.hlines(s.median, p - width * 0.4, p + width * 0.4, color=color, linewidth=2.5)


def _boxes(ax: Axes, positions: list[float], data: list[Spread], width: float, color: str) -> None:
    """A box per spread (quartiles and whiskers, no fliers), its median marked."""
    ax.bxp(
        [_box_stats(s) for s in data],
        positions=positions,
        widths=width * 0.7,
        showfliers=False,
        patch_artist=True,
        boxprops={"facecolor": color, "alpha": 0.55},
        medianprops={"color": "black"},
    )


def distribution(study: Study, found: Distribution, overall: dict[str, float] | None = None) -> Figure:
    """Violins (or boxes) per configuration, split by the figure's split (when it has one); a violin of one
    value is a line at it. ``overall``: a value per configuration label, drawn as a dashed line across it."""
    single = len({s.key[:2] for s in found.spreads}) <= 1
    groups: dict[str, dict[str, Spread]] = defaultdict(dict)
    for spread in found.spreads:
        experiment, phase, configuration = spread.key
        short = short_name(configuration, study.shared_model)
        groups[short if single else f"{experiment}/{phase}\n{short}"][spread.split] = spread
    for label, value in (overall or {}).items():
        if value is not None:
            groups.setdefault(label, {})
    labels = list(groups)
    present = {k for spreads in groups.values() for k in spreads}
    splits = [k for k in found.order if k in present] + sorted(present - set(found.order))
    fig, ax = new_figure(max(5.0, (0.5 + 0.45 * len(splits)) * len(labels)), 3.6)
    width = 0.8 / max(1, len(splits))
    for j, split in enumerate(splits):
        positions = [i - 0.4 + width * (j + 0.5) for i, label in enumerate(labels) if split in groups[label]]
        data = [groups[label][split] for label in labels if split in groups[label]]
        color = COLORS[j % len(COLORS)]
        if found.violin:
            _violins(ax, positions, data, width, color)
        else:
            _boxes(ax, positions, data, width, color)
        if found.split is not None:
            name = f"{found.split} {split}" if found.split else split
            ax.bar([0], [0], color=color, label=name)  # a legend entry only
    levels = [(i, level) for i, label in enumerate(labels) if (level := (overall or {}).get(label)) is not None]
    for n, (i, level) in enumerate(levels):
        ax.hlines(level, i - 0.45, i + 0.45, color="black", linestyles="dashed", linewidth=1.2,
                  label="overall" if n == 0 else "_nolegend_")  # fmt: skip
    tick(ax, labels)
    ax.set_ylabel(found.ylabel)
    low, high = ax.get_ylim()
    if low >= 0 or min((s.low for s in found.spreads), default=1) == 0:  # a line at 0 above the axis, not on it
        ax.set_ylim(-0.03 * (high - min(low, 0)), high)
    if found.split is not None or overall:
        legend(ax)
    say_empty(ax, [v for s in found.spreads for v in (s.low, s.high)] + list((overall or {}).values()))
    return Figure(found.name, found.title, found.sql, svg(fig))


def token_cv(study: Study, found: Distribution) -> Figure:
    """Fig. 12: the same-prompt and within-task CVs as distributions, the overall CV as a line."""
    table = study["token_cv"] if "token_cv" in study.tables else None
    rows = table.dicts() if table else []
    single = len({(r["experiment"], r["phase"]) for r in rows}) <= 1
    overall = {label_of(r, single, study.shared_model): r["overall_cv"] for r in rows}
    return distribution(study, found, overall)


def _makers(study: Study, distributions: dict[str, Distribution]) -> dict[str, Callable[[], Figure | None]]:
    def spread(name: str) -> Callable[[], Figure | None]:
        return lambda: distribution(study, distributions[name]) if name in distributions else None

    def table(name: str) -> Table:
        return study.tables.get(name) or Table(name, "", "", ["experiment", "phase", "configuration"], [])

    return {
        "fig-success": lambda: paper.success_strict(study),
        "fig-success-light-writes": lambda: paper.success_light_writes(study),
        "fig-success-difficulty": lambda: success_by(study, "difficulty"),
        "fig-success-family": lambda: success_by(study, "family"),
        "fig-pass-k": lambda: pass_curves(study),
        "fig-variance-share": lambda: paper.variance_shares(study),
        "fig-variance": lambda: variance_bars(study),
        "fig-tool-errors-tool": lambda: paper.error_heatmap(
            study,
            table("tool_errors_by_tool"),
            "tool",
            "fig-tool-errors-tool",
            "Tool-call error rate by tool and configuration (paper fig. 7a)",
        ),
        "fig-tool-errors": lambda: paper.error_heatmap(
            study,
            table("tool_errors_by_resource_type"),
            "resource_type",
            "fig-tool-errors",
            "Tool-call error rate by FHIR resource type and configuration (paper fig. 7b)",
        ),
        "fig-failure-modes": lambda: paper.failure_mode_bars(study, table("failure_modes")),
        "fig-calls": spread("fig-calls"),
        "fig-calls-excess": spread("fig-calls-excess"),
        "fig-tokens": spread("fig-tokens"),
        "fig-tokens-difficulty": spread("fig-tokens-difficulty"),
        "fig-tokens-outcome": spread("fig-tokens-outcome"),
        "fig-tokens-calls": spread("fig-tokens-calls"),
        "fig-token-cv": lambda: (
            token_cv(study, distributions["fig-token-cv"]) if "fig-token-cv" in distributions else None
        ),
        "fig-cost": lambda: cost_front(study),
    }


def draw(study: Study, distributions: dict[str, Distribution], names: tuple[str, ...] = FIGURES) -> list[Figure]:
    """The figures named (default every one) that the study's data allows, in report order."""
    study = replace(
        study,
        tables={name: replace(t, rows=[_steady(r) for r in t.rows]) for name, t in study.tables.items()},
        shared_model=_steady(study.shared_model),
    )
    distributions = {name: replace(d, spreads=[_steady(s) for s in d.spreads]) for name, d in distributions.items()}
    makers = _makers(study, distributions)
    with matplotlib.rc_context(STYLE):
        return [f for f in (makers[name]() for name in FIGURES if name in names) if f is not None]


def _steady(value: Any) -> Any:
    """Floats to 12 significant digits and text with its hidden characters escaped, in rows, tuples and spreads.

    Text becomes labels, and a label holding a control or bidi character would not read as what it is (or make
    the SVG invalid XML).

    DuckDB sums in parallel, so an average or a variance over 100k runs can differ in its last bit from one
    run of the same log to the next; drawn as it is, that bit reaches the SVG (its clip-path ids hash the
    exact coordinates) and the same log would not give the same bytes.
    """
    if isinstance(value, float):
        return float(f"{value:.12g}")
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, tuple):
        return tuple(_steady(v) for v in value)
    if isinstance(value, Spread):
        return replace(value, **{f.name: _steady(getattr(value, f.name)) for f in fields(value)})
    return value
