"""A study of one log file, start to end: what `fae stats`, `fae report` and ``fae.stats``/``fae.write_report`` run.

The CLI calls these rather than fae.api, whose import loads the agents, the proxy and the LLM clients
(seconds of CPU a study never uses). Only the report's drawing children load matplotlib.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from fae.errors import FaeError
from fae.report.cache import cached_scope
from fae.report.distributions import all_distributions
from fae.report.drawing import Drawing
from fae.report.explorer.matrix import Cell, cells
from fae.report.html import render_report, write_report
from fae.report.prices import PriceTable
from fae.report.scope import FIGURE_TABLES, Figure, Scope
from fae.report.source import study_log
from fae.report.study import Step, Study, compute_study


def study(
    log: str | Path,
    *,
    experiment: str | None = None,
    phase: str | None = None,
    pooled: bool = False,
    prices: PriceTable | None = None,
    pairs: Sequence[tuple[str, str]] | None = None,
    tables: Sequence[str] | None = None,
    on_step: Step | None = None,
) -> Study:
    """Every analysis of the log's runs in scope (or the ``tables`` named), each table with its SQL;
    ``on_step(done, total, name)`` as each table starts."""
    scope = Scope(experiment, phase, pooled)
    with study_log(log) as opened, cached_scope(opened, scope) as source:
        return compute_study(
            source,
            scope,
            prices=prices,
            pairs=list(pairs) if pairs else None,
            only=set(tables) if tables else None,
            on_step=on_step,
        )


def report(
    log: str | Path,
    output: str | Path,
    *,
    experiment: str | None = None,
    phase: str | None = None,
    pooled: bool = False,
    prices: PriceTable | None = None,
    pairs: Sequence[tuple[str, str]] | None = None,
    on_step: Step | None = None,
) -> Path:
    """Write the HTML report of the log's runs in scope to ``output``; returns its path. ``on_step(done, total,
    name)`` as each table, the figures and the page start."""
    folder = Path(output).parent
    if not folder.is_dir():  # said before the study runs, not after
        raise FaeError(f"cannot write the report to {output}: no directory {folder}")
    told = on_step or (lambda done, total, name: None)
    found, figures, grid, steps = report_parts(
        log, experiment=experiment, phase=phase, pooled=pooled, prices=prices, pairs=pairs, on_step=told
    )
    told(steps - 1, steps, "page")
    written = write_report(found, figures, output, log_name=Path(log).name, cells=grid)
    told(steps, steps, "written")
    return written


def report_page(
    log: str | Path,
    *,
    experiment: str | None = None,
    phase: str | None = None,
    pooled: bool = False,
    prices: PriceTable | None = None,
    pairs: Sequence[tuple[str, str]] | None = None,
    on_step: Step | None = None,
) -> str:
    """The report as `fae view` serves it: the same page, every cell that stands for runs linked to them."""
    told = on_step or (lambda done, total, name: None)
    found, figures, grid, steps = report_parts(
        log, experiment=experiment, phase=phase, pooled=pooled, prices=prices, pairs=pairs, on_step=told
    )
    told(steps - 1, steps, "page")
    return render_report(found, figures, log_name=Path(log).name, cells=grid, linked=True)


def report_parts(
    log: str | Path,
    *,
    experiment: str | None,
    phase: str | None,
    pooled: bool = False,
    prices: PriceTable | None,
    pairs: Sequence[tuple[str, str]] | None,
    on_step: Step,
) -> tuple[Study, list[Figure], list[Cell], int]:
    """The study, its figures and the configuration × task grid, and the count of steps (two left: the page
    and its writing)."""
    planned = [0]  # the study's count of steps: its tables, then the figures and the page

    def counted(done: int, total: int, name: str) -> None:
        planned[0] = total
        on_step(done, total, name)

    scope = Scope(experiment, phase, pooled)
    with Drawing() as drawing:  # matplotlib loads in the children while the queries run here
        with study_log(log) as opened, cached_scope(opened, scope) as source:

            def draw(tables: Study) -> None:  # the children draw while the tables no figure reads are computed
                drawing.send(tables, all_distributions(source, tables))

            found = compute_study(
                source,
                scope,
                prices=prices,
                pairs=list(pairs) if pairs else None,
                first=FIGURE_TABLES,
                ready=draw,
                on_step=counted,
                extra_steps=2,
            )
            grid = cells(source, scope)
        steps = planned[0]
        on_step(steps - 2, steps, "figures")
        figures = drawing.figures()
    return found, figures, grid, steps
