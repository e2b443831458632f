"""Figures never look empty where the log holds zeros: a zero bar is drawn, an all-zero axes says so, and
every series of a figure gets its own colour."""

from __future__ import annotations

import matplotlib

from fae.report.plotting import COLORS, STYLE, ZERO, new_figure, svg


def _drawn(heights: list[float], lines: list[float] | None = None) -> str:
    with matplotlib.rc_context(STYLE):
        fig, ax = new_figure(7.0)
        ax.bar(range(len(heights)), heights, 0.6, yerr=[0] * len(heights), color=COLORS[0])
        if lines is not None:
            ax.plot(range(len(lines)), lines)
        return svg(fig)


def test_a_zero_bar_is_drawn_as_a_line_at_zero_in_its_colour():
    drawn = _drawn([10, 0, 5])
    assert drawn.count('id="zero') == 1, "the zero bar is not marked"
    assert ZERO not in drawn
    assert _drawn([10, 2, 5]).count('id="zero') == 0


def test_an_axes_of_zeros_says_all_zero_and_one_value_is_enough_to_draw_it_plainly():
    assert ZERO in _drawn([0, 0, 0])
    assert ZERO in _drawn([0, 0], lines=[0.0, 0.0])
    assert ZERO not in _drawn([0, 0], lines=[0.0, 0.5])
    assert ZERO not in _drawn([0, 0, 0.1])


def test_the_palette_has_a_distinct_colour_for_each_of_twelve_series():
    assert len(set(COLORS)) == len(COLORS) >= 12
    assert "#f0e442" not in COLORS, "Okabe & Ito's yellow is too pale on white"
