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

from fae.report.distributions import GRID, Distribution, Spread
from fae.report.figure_cost import cost_front
from fae.report.plotting import COLORS, STYLE, legend, new_figure, short_name, svg
from fae.report.scope import FIGURES, Figure, Table
from fae.report.study import Study
from fae.util.visible import visible


def _label(row: dict, single: bool, model: str | None) -> str:
    configuration = short_name(str(row["configuration"]), model)
    if single:
        return configuration
    return "/".join(str(row[k]) for k in ("experiment", "phase") if row[k] is not None) + f"\n{configuration}"


def _from_zero(ax: Axes) -> None:
    """A quantity that cannot be negative starts at 0 (and an all-zero one still shows an axis)."""
    top = ax.get_ylim()[1]
    ax.set_ylim(0, top if top > 0.06 else 1)


def _labels(table: Table, model: str | None) -> tuple[bool, list[str]]:
    rows = table.dicts()
    single = len({(r.get("experiment"), r.get("phase")) for r in rows}) <= 1
    return single, list(dict.fromkeys(_label(r, single, model) for r in rows))


def _tick(ax: Axes, labels: list[str]) -> None:
    longest = max((len(line) for label in labels for line in label.split("\n")), default=0)
    crowded = longest * len(labels) > 90
    ax.set_xticks(range(len(labels)), labels, rotation=25 if crowded else 0, ha="right" if crowded else "center")


def success_bars(study: Study) -> Figure | None:
    table = study["success"]
    rows = [r for r in table.dicts() if r["slice"] == "all"]
    if not rows:
        return None
    single, _ = _labels(table, study.shared_model)
    labels = [_label(r, single, study.shared_model) for r in rows]
    fig, ax = new_figure(max(4.5, 1.3 * len(rows)))
    x = range(len(rows))
    ax.bar(
        [i - 0.2 for i in x],
        [r["strict_mean"] for r in rows],
        0.4,
        yerr=[r["strict_std"] or 0 for r in rows],
        capsize=3,
        color=COLORS[0],
        label="strict",
    )
    ax.bar(
        [i + 0.2 for i in x],
        [r["light_mean"] or 0 for r in rows],
        0.4,
        yerr=[r["light_std"] or 0 for r in rows],
        capsize=3,
        color=COLORS[1],
        label="light",
    )
    _tick(ax, labels)
    ax.set_ylabel("success rate (%)")
    ax.set_ylim(0, 105)
    legend(ax)
    return Figure("fig-success", "Success rate per configuration, mean ± std over trials", table.sql, svg(fig))


def success_by(study: Study, slice_name: str) -> Figure | None:
    table = study["success"]
    rows = [r for r in table.dicts() if r["slice"] == slice_name]
    if not rows:
        return None
    single, _ = _labels(table, study.shared_model)
    configs = list(dict.fromkeys(_label(r, single, study.shared_model) for r in rows))
    values = sorted({r["value"] for r in rows})
    fig, ax = new_figure(max(4.5, 0.9 * len(values) * max(1, len(configs)) * 0.5 + 2))
    width = 0.8 / len(configs)
    for c, config in enumerate(configs):
        found = {r["value"]: r for r in rows if _label(r, single, study.shared_model) == config}
        ax.bar(
            [i + c * width - 0.4 + width / 2 for i in range(len(values))],
            [found[v]["strict_mean"] if v in found else 0 for v in values],
            width,
            yerr=[(found[v]["strict_std"] or 0) if v in found else 0 for v in values],
            capsize=2,
            color=COLORS[c % len(COLORS)],
            label=config.replace("\n", " "),
        )
    _tick(ax, [str(v) for v in values])
    ax.set_xlabel(slice_name)
    ax.set_ylabel("strict success (%)")
    ax.set_ylim(0, 105)
    legend(ax)
    return Figure(
        f"fig-success-{slice_name}", f"Strict success by {slice_name}, mean ± std over trials", table.sql, svg(fig)
    )


def pass_curves(study: Study) -> Figure | None:
    table = study["pass_k"]
    rows = table.dicts()
    if not rows:
        return None
    single, _ = _labels(table, study.shared_model)
    series: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        series[_label(r, single, study.shared_model)].append(r)
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
    single, labels = _labels(table, study.shared_model)
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
    _tick(ax, labels)
    ax.set_ylabel("variance (pp²)")
    _from_zero(ax)
    legend(ax)
    return Figure("fig-variance", "Variance decomposition of the strict outcome", table.sql, svg(fig))


def grouped_bars(
    study: Study, table: Table, category: str, value: str, ylabel: str, name: str, title: str, scale: float = 1.0
) -> Figure | None:
    rows = table.dicts()
    if not rows:
        return None
    single, configs = _labels(table, study.shared_model)
    categories = list(dict.fromkeys(str(r[category]) for r in rows))
    fig, ax = new_figure(max(5.0, 0.35 * len(categories) * len(configs) + 2), 3.4)
    width = 0.8 / len(configs)
    for c, config in enumerate(configs):
        found = {str(r[category]): r[value] for r in rows if _label(r, single, study.shared_model) == config}
        ax.bar(
            [i + c * width - 0.4 + width / 2 for i in range(len(categories))],
            [(found.get(k) or 0) * scale for k in categories],
            width,
            color=COLORS[c % len(COLORS)],
            label=config.replace("\n", " "),
        )
    _tick(ax, categories)
    ax.set_ylabel(ylabel)
    _from_zero(ax)
    legend(ax)
    return Figure(name, title, table.sql, svg(fig))


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


def distribution(study: Study, found: Distribution) -> Figure:
    """Violins (or boxes) per configuration, split by the figure's split (when it has one)."""
    single = len({s.key[:2] for s in found.spreads}) <= 1
    groups: dict[str, dict[str, Spread]] = defaultdict(dict)
    for spread in found.spreads:
        experiment, phase, configuration = spread.key
        short = short_name(configuration, study.shared_model)
        groups[short if single else f"{experiment}/{phase}\n{short}"][spread.split] = spread
    labels = list(groups)
    splits = sorted({k for spreads in groups.values() for k in spreads})
    fig, ax = new_figure(max(5.0, (0.5 + 0.45 * len(splits)) * len(labels)), 3.6)
    width = 0.8 / len(splits)
    for j, split in enumerate(splits):
        positions = [i - 0.4 + width * (j + 0.5) for i, label in enumerate(labels) if split in groups[label]]
        data = [groups[label][split] for label in labels if split in groups[label]]
        color = COLORS[j % len(COLORS)]
        if found.violin and all(s.low < s.high for s in data):
            parts = ax.violin(
                [_violin_stats(s) for s in data], positions=positions, widths=width * 0.9, showmedians=True
            )
            # matplotlib's stubs say one Collection; at run time "bodies" is the list of each violin's PolyCollection
            for body in cast("list[PolyCollection]", parts["bodies"]):
                body.set_facecolor(color)
        else:
            ax.bxp(
                [_box_stats(s) for s in data],
                positions=positions,
                widths=width * 0.7,
                showfliers=False,
                patch_artist=True,
                boxprops={"facecolor": color, "alpha": 0.55},
                medianprops={"color": "black"},
            )
        if found.split:
            ax.bar([0], [0], color=color, label=f"{found.split} {split}")  # a legend entry only
    _tick(ax, labels)
    ax.set_ylabel(found.ylabel)
    if found.split:
        legend(ax)
    return Figure(found.name, found.title, found.sql, svg(fig))


def _makers(study: Study, distributions: dict[str, Distribution]) -> dict[str, Callable[[], Figure | None]]:
    def spread(name: str) -> Callable[[], Figure | None]:
        return lambda: distribution(study, distributions[name]) if name in distributions else None

    return {
        "fig-success": lambda: success_bars(study),
        "fig-success-difficulty": lambda: success_by(study, "difficulty"),
        "fig-success-family": lambda: success_by(study, "family"),
        "fig-pass-k": lambda: pass_curves(study),
        "fig-variance": lambda: variance_bars(study),
        "fig-tool-errors": lambda: grouped_bars(
            study,
            study["tool_errors_by_resource_type"],
            "resource_type",
            "error_rate",
            "tool-call error rate (%)",
            "fig-tool-errors",
            "Tool-call error rate by FHIR resource type",
            100,
        ),
        "fig-failure-modes": lambda: grouped_bars(
            study,
            _agent_modes(study["failure_modes"]),
            "failure_mode",
            "runs",
            "failed runs",
            "fig-failure-modes",
            "Failure modes of failed runs (a run counts under each of its modes; errored runs apart)",
        ),
        "fig-calls": spread("fig-calls"),
        "fig-tokens": spread("fig-tokens"),
        "fig-tokens-difficulty": spread("fig-tokens-difficulty"),
        "fig-token-cv": lambda: grouped_bars(
            study,
            _cv_long(study["token_cv"]),
            "level",
            "cv",
            "coefficient of variation",
            "fig-token-cv",
            "Token coefficient of variation by level",
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


def _agent_modes(table: Table) -> Table:
    """failure_modes without the rows left out of the shares (errored runs, runs not judged): no mode of the agent."""
    return replace(table, rows=[r for r, d in zip(table.rows, table.dicts(), strict=True) if d["share"] is not None])


def _cv_long(table: Table) -> Table:
    """token_cv with one row per level, for grouped bars."""
    rows = []
    for r in table.dicts():
        for level in ("same_prompt", "within_task", "overall"):
            rows.append((r["experiment"], r["phase"], r["configuration"], level.replace("_", "-"), r[f"{level}_cv"]))
    return Table(table.name, table.title, table.sql, ["experiment", "phase", "configuration", "level", "cv"], rows)
