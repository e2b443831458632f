"""What every figure of the report shares: the style, the colours, a new figure, its SVG, legend and labels."""

from __future__ import annotations

import io
import re
from typing import Any

from matplotlib.axes import Axes
from matplotlib.backends.backend_svg import RendererSVG
from matplotlib.figure import Figure as MplFigure
from matplotlib.typing import RcKeyType

# applied only while the report draws (rc_context), so an embedding program's settings are left alone
STYLE: dict[RcKeyType, Any] = {
    "svg.fonttype": "none",
    "text.parse_math": False,  # a label is text from the log: a "$" in it is a dollar sign, never mathtext
    "svg.hashsalt": "fae-report",
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}
COLORS = ("#3b6ea8", "#d9822b", "#4a9a5b", "#b8443f", "#7d5ba6", "#8c6d4f", "#c76fa8", "#7f7f7f")


def svg(fig: MplFigure) -> str:
    """The figure cropped to its ink, as ``bbox_inches="tight"`` crops it, but laid out once, not drawn twice.

    The bars, lines and violins are clipped to the axes, so only the labels, ticks and legend can reach
    past them: leaving the rest out of the layout gives the same box without measuring every artist.
    """
    for ax in fig.axes:
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


def legend(ax: Axes) -> None:
    """The legend beside the axes, outside the data."""
    ax.legend(frameon=False, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))


def new_figure(width: float, height: float = 3.6) -> tuple[MplFigure, Axes]:
    """A figure of one axes, 7 to 12 inches wide."""
    fig = MplFigure(figsize=(min(max(width, 7.0), 12.0), height), dpi=72)  # the SVG dpi: layout measures as it draws
    return fig, fig.add_subplot()
