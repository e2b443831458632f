"""The report's figure of success against cost per configuration, with the Pareto front (as agent leaderboards
draw it): each configuration a point, those no other beats on both axes filled and joined by a staircase."""

from __future__ import annotations

from collections import defaultdict

from fae.report.plotting import COLORS, legend, new_figure, short_name, svg
from fae.report.scope import Figure
from fae.report.study import Study

LOG_SCALE_SPAN = 20.0
"""Costs spread wider than this factor are drawn on a log axis (a mini model beside a large one)."""


def cost_front(study: Study) -> Figure | None:
    """Strict success (%) against USD per run, one point per configuration, the front of each experiment and
    phase as a staircase; configurations without a cost (no price, unknown tokens) are named in the title."""
    table = study.tables.get("cost")
    if table is None:
        return None
    rows = table.dicts()
    drawn = [r for r in rows if r["usd_per_run"] is not None and r["success_pct"] is not None]
    if not drawn:
        return None
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for row in drawn:
        groups[(row["experiment"], row["phase"])].append(row)
    single = len(groups) == 1
    fig, ax = new_figure(7.5, 4.2)
    for index, (key, found) in enumerate(groups.items()):
        color = COLORS[index % len(COLORS)]
        name = "" if single else "/".join(str(k) for k in key if k is not None) + " "
        front = sorted((r for r in found if r["pareto"]), key=lambda r: (r["usd_per_run"], r["success_pct"]))
        rest = [r for r in found if not r["pareto"]]
        ax.step(
            [r["usd_per_run"] for r in front], [r["success_pct"] for r in front], where="post", color=color, alpha=0.6
        )
        ax.scatter(
            [r["usd_per_run"] for r in front],
            [r["success_pct"] for r in front],
            color=color,
            zorder=3,
            label=f"{name}Pareto front",
        )
        if rest:
            ax.scatter(
                [r["usd_per_run"] for r in rest],
                [r["success_pct"] for r in rest],
                facecolors="none",
                edgecolors=color,
                zorder=3,
                label=f"{name}dominated",
            )
        for row in found:
            ax.annotate(
                short_name(str(row["configuration"]), study.shared_model),
                (row["usd_per_run"], row["success_pct"]),
                xytext=(4, 4),
                textcoords="offset points",
                fontsize=7,
            )
    costs = [r["usd_per_run"] for r in drawn]
    if min(costs) > 0 and max(costs) / min(costs) > LOG_SCALE_SPAN:
        ax.set_xscale("log")
    else:
        ax.set_xlim(left=0, right=max(costs) * 1.15 or 1)
    ax.set_xlabel("USD per run (the agent's LLM calls)")
    ax.set_ylabel("strict success (%)")
    ax.set_ylim(0, 105)
    legend(ax)
    missing = sorted({short_name(str(r["configuration"]), study.shared_model) for r in rows if r["usd"] is None})
    title = "Success against cost per configuration, with the Pareto front"
    if missing:
        title += f" (not drawn, no cost: {', '.join(missing)})"
    return Figure("fig-cost", title, table.sql, svg(fig))
