"""What every figure of the report shares: the style, the colours, a new figure, its SVG, legend and labels."""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from typing import Any

from matplotlib.axes import Axes
from matplotlib.backends.backend_svg import RendererSVG
from matplotlib.collections import LineCollection
from matplotlib.container import BarContainer
from matplotlib.figure import Figure as MplFigure
from matplotlib.patches import Rectangle
from matplotlib.typing import RcKeyType

from fae.report.scope import Table

# applied only while the report draws (rc_context), so an embedding program's settings are left alone
STYLE: dict[RcKeyType, Any] = {
    "svg.fonttype": "none",
    "text.parse_math": False,  # a label is text from the log: a "$" in it is a dollar sign, never mathtext
    "svg.hashsalt": "fae-report",
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}
COLORS = (
    "#0072b2",  # blue        (Okabe & Ito's colour-blind-safe set first: the common case of few series)
    "#e69f00",  # orange
    "#009e73",  # bluish green
    "#cc79a7",  # reddish purple
    "#56b4e9",  # sky blue
    "#d55e00",  # vermillion
    "#332288",  # indigo      (then Paul Tol's muted set: told apart by dichromats too, and from the first)
    "#999933",  # olive
    "#882255",  # wine
    "#44aa99",  # teal
    "#000000",  # black
    "#ddcc77",  # sand
)
"""Twelve distinct series colours, each told apart by colour-blind readers (deuteranopia, protanopia,
tritanopia): Okabe & Ito's palette less its yellow (too pale on white), then Paul Tol's muted scheme less the
hues it shares. A figure of more series than this repeats one; no figure of the report draws that many."""

ZERO = "all zero"
"""Said across an axes whose every value is zero, so an empty-looking chart is never read as missing data."""


def _bars(ax: Axes) -> list[Rectangle]:
    return [p for c in ax.containers if isinstance(c, BarContainer) for p in c.patches if isinstance(p, Rectangle)]


def mark_zeros(ax: Axes) -> None:
    """A zero bar drawn as a thick line at zero in its colour (a 0 % bar is seen, not missing), and an axes
    whose every bar and line is zero says so across it. An axes with a drawing other than bars, lines and error
    bars (a violin, a box, whose legend entries are empty bars; a scatter) is left as it is, and so is a zero
    segment of a stack (it would read as a line between its neighbours)."""
    if any(line.get_gid() == "zero" for line in ax.lines) or any(t.get_text() == ZERO for t in ax.texts):
        return  # marked already
    if any(not isinstance(c, LineCollection) for c in ax.collections):
        return
    if any(not isinstance(p, Rectangle) for p in ax.patches):
        return
    bars = _bars(ax)
    heights = [p.get_height() for p in bars]
    lines = [y for line in ax.lines for y in line.get_ydata()]  # type: ignore[union-attr]
    for bar in bars:
        if bar.get_height() == 0 and bar.get_width() > 0 and bar.get_y() == 0:
            x = bar.get_x()
            ax.plot(
                [x, x + bar.get_width()],
                [0, 0],
                color=bar.get_facecolor(),
                linewidth=3,
                solid_capstyle="butt",
                gid="zero",
            )
    errors = [y for c in ax.collections for segment in c.get_segments() for _, y in segment]  # type: ignore[attr-defined]
    values = [v for v in (*heights, *lines, *errors) if v == v]  # NaN (no value) is neither zero nor not
    if values and all(v == 0 for v in values):
        ax.text(0.5, 0.5, ZERO, transform=ax.transAxes, ha="center", va="center", fontsize=13, color="#555555")


HEATMAP = "viridis"  # perceptually uniform and colour-blind safe; a cell's number is written on it too


def svg(fig: MplFigure) -> str:
    """The figure cropped to its ink, as ``bbox_inches="tight"`` crops it, but laid out once, not drawn twice.

    The bars, lines and violins are clipped to the axes, so only the labels, ticks and legend can reach
    past them: leaving the rest out of the layout gives the same box without measuring every artist.
    """
    for ax in fig.axes:
        mark_zeros(ax)
        for artist in (*ax.patches, *ax.lines, *ax.collections):
            artist.set_in_layout(False)
    width, height = fig.get_size_inches() * 72
    box = fig.get_tightbbox(RendererSVG(width, height, io.StringIO())).padded(0.1)  # savefig's tight pad
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches=box, metadata={"Date": None, "Creator": None})
    text = buffer.getvalue()
    return re.sub(r"^.*?(<svg\b)", r"\1", text, count=1, flags=re.S)  # drop the XML prologue and doctype


def short_name(configuration: str, model: str | None) -> str:
    """A configuration without the model every configuration shares (the report's header names it)."""
    return configuration.removesuffix(f"@{model}") if model else configuration


def say_empty(ax: Axes, values: Sequence[float | None]) -> None:
    """Words where the data drawn would read as a blank axis: "no data" (nothing to draw) or "all zero"."""
    known = [v for v in values if v is not None]
    text = "no data" if not known else "all zero" if all(v == 0 for v in known) else None
    if text:
        ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="#555555", fontsize=11)


def bars(ax: Axes, x: list[float], heights: list[float], width: float, color: str, **kw: Any) -> None:
    """Bars whose edge is drawn in their colour, so a bar of height 0 still shows as a line on the axis."""
    ax.bar(x, heights, width, color=color, edgecolor=color, linewidth=1.5, **kw)


def legend(ax: Axes) -> None:
    """The legend right beside the axes, outside the data, in type a reader can read."""
    ax.legend(frameon=False, fontsize=8.5, loc="upper left", bbox_to_anchor=(1.0, 1), borderaxespad=0.3)


def new_figure(width: float, height: float = 3.6) -> tuple[MplFigure, Axes]:
    """A figure of one axes, 7 to 12 inches wide."""
    fig = MplFigure(figsize=(min(max(width, 7.0), 12.0), height), dpi=72)  # the SVG dpi: layout measures as it draws
    return fig, fig.add_subplot()


def label_of(row: dict, single: bool, model: str | None) -> str:
    configuration = short_name(str(row["configuration"]), model)
    if single:
        return configuration
    return "/".join(str(row[k]) for k in ("experiment", "phase") if row[k] is not None) + f"\n{configuration}"


def from_zero(ax: Axes) -> None:
    """A quantity that cannot be negative starts at 0 (and an all-zero one still shows an axis)."""
    top = ax.get_ylim()[1]
    ax.set_ylim(0, top if top > 0.06 else 1)


def labels_of(table: Table, model: str | None) -> tuple[bool, list[str]]:
    rows = table.dicts()
    single = len({(r.get("experiment"), r.get("phase")) for r in rows}) <= 1
    return single, list(dict.fromkeys(label_of(r, single, model) for r in rows))


def tick(ax: Axes, labels: list[str]) -> None:
    longest = max((len(line) for label in labels for line in label.split("\n")), default=0)
    crowded = longest * len(labels) > 90
    ax.set_xticks(range(len(labels)), labels, rotation=25 if crowded else 0, ha="right" if crowded else "center")
