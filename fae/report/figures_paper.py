"""The reference paper's bar and heatmap figures as it draws them: success (5a, 5b), variance shares (6a),
tool-call error heatmaps (7a, 7b) and failure modes (8)."""

from __future__ import annotations

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure as MplFigure

from fae.judge.failure_modes import MODES
from fae.report.plotting import (
    COLORS,
    HEATMAP,
    bars,
    label_of,
    labels_of,
    legend,
    new_figure,
    say_empty,
    svg,
    tick,
)
from fae.report.scope import Figure, Table
from fae.report.study import Study

# the paper's six failure modes (its "other" included) and fae's no_tool_call, always drawn, zeros too
FAILURE_MODES = (*MODES, "other")


def _mean_std(study: Study, mean: str, std: str, name: str, title: str, ylabel: str) -> Figure | None:
    """One bar per configuration with its error bar: the mean ± std over trials of the success table."""
    table = study["success"]
    rows = [r for r in table.dicts() if r["slice"] == "all"]
    if not rows:
        return None
    single, _ = labels_of(table, study.shared_model)
    labels = [label_of(r, single, study.shared_model) for r in rows]
    fig, ax = new_figure(max(4.5, 1.1 * len(rows)))
    values = [r[mean] for r in rows]
    for i, (row, value) in enumerate(zip(rows, values, strict=True)):
        if value is not None:
            color = COLORS[i % len(COLORS)]
            bars(ax, [i], [value], 0.6, color, yerr=[row[std] or 0], capsize=4)
            ax.text(i, value + (row[std] or 0) + 1.5, f"{value:.1f}", ha="center", va="bottom", fontsize=7)
        else:
            ax.text(i, 2, "no runs", ha="center", va="bottom", fontsize=7, color="#555555")
    tick(ax, labels)
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 110)
    say_empty(ax, values)
    return Figure(name, title, table.sql, svg(fig))


def success_strict(study: Study) -> Figure | None:
    return _mean_std(
        study,
        "strict_mean",
        "strict_std",
        "fig-success",
        "Strict success per configuration, mean ± std over trials (paper fig. 5a)",
        "strict success (%)",
    )


def success_light_writes(study: Study) -> Figure | None:
    return _mean_std(
        study,
        "light_writes_mean",
        "light_writes_std",
        "fig-success-light-writes",
        "Light success over tasks that write, mean ± std over trials (paper fig. 5b)",
        "light success, write tasks (%)",
    )


def variance_shares(study: Study) -> Figure | None:
    """Each component's share of the total variance, stacked to 100 % (a configuration with none: no data)."""
    table = study["variance"]
    rows = table.dicts()
    if not rows:
        return None
    _, labels = labels_of(table, study.shared_model)
    fig, ax = new_figure(max(4.5, 1.2 * len(rows)))
    bottom = [0.0] * len(rows)
    for column, name, c in (  # the colours of fig. 6b's components
        ("same_prompt_share", "same prompt (run to run)", 2),
        ("within_task_share", "within task (variations)", 1),
        ("between_task_share", "between tasks", 0),
    ):
        values = [100 * (r[column] or 0) for r in rows]
        ax.bar(range(len(rows)), values, 0.6, bottom=bottom, color=COLORS[c], label=name)
        for i, (b, v) in enumerate(zip(bottom, values, strict=True)):
            if v >= 4:
                ax.text(i, b + v / 2, f"{v:.0f}%", ha="center", va="center", fontsize=7, color="white")
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    for i, r in enumerate(rows):
        if r["between_task_share"] is None:  # total variance 0: every run the same outcome
            ax.text(i, 50, "no variance", ha="center", va="center", fontsize=7, color="#555555")
    tick(ax, labels)
    ax.set_ylabel("share of total variance (%)")
    ax.set_ylim(0, 100)
    say_empty(ax, [r["total_pp2"] for r in rows])
    legend(ax)
    return Figure(
        "fig-variance-share",
        "Variance of the strict outcome as shares of its total (paper fig. 6a)",
        table.sql,
        svg(fig),
    )


def error_heatmap(study: Study, table: Table, by: str, name: str, title: str) -> Figure | None:
    """Error rate per (``by`` value, configuration), each cell annotated with its rate and its calls."""
    rows = table.dicts()
    if not rows:
        return None
    single, configs = labels_of(table, study.shared_model)
    keys = sorted({str(r[by]) for r in rows})
    rate = np.full((len(keys), len(configs)), np.nan)
    calls = np.zeros((len(keys), len(configs)), dtype=int)
    for r in rows:
        i, j = keys.index(str(r[by])), configs.index(label_of(r, single, study.shared_model))
        rate[i, j], calls[i, j] = 100 * r["error_rate"], r["calls"]
    fig = MplFigure(figsize=(min(max(2.5 + 1.3 * len(configs), 6.0), 12.0), max(2.6, 1.2 + 0.38 * len(keys))), dpi=72)
    ax = fig.add_subplot()
    cmap = colormaps[HEATMAP].with_extremes(bad="#eeeeee")  # a cell with no calls: grey, and written so
    image = ax.imshow(np.ma.masked_invalid(rate), cmap=cmap, vmin=0, vmax=100, aspect="auto")
    for i in range(len(keys)):
        for j in range(len(configs)):
            if calls[i, j]:
                dark = rate[i, j] < 60  # viridis is dark at the bottom: white text there
                ax.text(j, i, f"{rate[i, j]:.0f}% (n={calls[i, j]})", ha="center", va="center", fontsize=7,
                        color="white" if dark else "black")  # fmt: skip
            else:
                ax.text(j, i, "no calls", ha="center", va="center", fontsize=7, color="#555555")
    ax.set_xticks(range(len(configs)), [c.replace("\n", " ") for c in configs], rotation=20, ha="right")
    ax.set_yticks(range(len(keys)), keys)
    ax.spines[:].set_visible(False)
    fig.colorbar(image, ax=ax, label="error rate (%)", fraction=0.04)
    return Figure(name, title, table.sql, svg(fig))


def failure_mode_bars(study: Study, table: Table) -> Figure | None:
    """Failed runs per mode and configuration, every mode drawn (a run counts under each mode it carries)."""
    rows = [r for r in table.dicts() if r["share"] is not None]  # errored and unjudged runs carry no mode
    if not table.rows:
        return None
    single, configs = labels_of(table, study.shared_model)
    extra = sorted({str(r["failure_mode"]) for r in rows} - set(FAILURE_MODES))  # another author's labels
    categories = [*FAILURE_MODES, *extra]
    fig, ax = new_figure(max(6.0, 0.3 * len(categories) * len(configs) + 2), 3.6)
    width = 0.8 / max(1, len(configs))
    counted = []
    for c, config in enumerate(configs):
        found = {str(r["failure_mode"]): r["runs"] for r in rows if label_of(r, single, study.shared_model) == config}
        values = [found.get(k, 0) for k in categories]
        counted += values
        x = [i + c * width - 0.4 + width / 2 for i in range(len(categories))]
        bars(ax, x, values, width, COLORS[c % len(COLORS)], label=config.replace("\n", " "))
    tick(ax, categories)
    ax.set_ylabel("failed runs with the mode")
    top = max(counted, default=0)
    ax.set_ylim(0, top * 1.1 if top else 1)
    say_empty(ax, counted or [None])
    legend(ax)
    return Figure(
        "fig-failure-modes",
        "Failure modes of failed runs, a run under each of its modes (paper fig. 8; errored runs apart)",
        table.sql,
        svg(fig),
    )
