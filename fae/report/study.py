"""A whole study over one log: every table, in the order `fae stats` prints them and the report shows them."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from fae.errors import FaeError
from fae.report import cost, derived, tables
from fae.report.prices import PriceTable, shipped_prices
from fae.report.scope import Queryable, Scope, Table

Step = Callable[[int, int, str], None]
"""``(done, total, name)``: told as step ``name`` starts, ``done`` steps of ``total`` behind it."""


@dataclass
class Study:
    """The tables of one scope of a log, by name."""

    scope: Scope
    tables: dict[str, Table] = field(default_factory=dict)
    shared_model: str | None = None
    """The model every configuration names (``…@MODEL``), if they all share one."""

    def __getitem__(self, name: str) -> Table:
        return self.tables[name]


def compute_study(
    log: Queryable,
    scope: Scope | None = None,
    *,
    prices: PriceTable | None = None,
    pairs: list[tuple[str, str]] | None = None,
    only: set[str] | None = None,
    first: Collection[str] = (),
    ready: Callable[[Study], None] | None = None,
    on_step: Step | None = None,
    extra_steps: int = 0,
) -> Study:
    """Every analysis of the runs in ``scope`` (or the tables named in ``only``), each with its SQL; the cost
    with ``prices`` (default: fae's list prices, ``fae.report.prices``).

    The tables named in ``first`` (and the overview) are computed before the others and handed to ``ready``
    as a study of their own, so that work on them (the report's drawing) overlaps the rest. ``on_step(done,
    total, name)`` is told as each table is made (``total`` counts ``extra_steps`` more, the caller's).
    """
    scope = scope or Scope()
    _, found = log.query(f"WITH {scope.cte()} SELECT count(*) FROM scope")
    if not found[0][0]:
        what = " and ".join(f"{k} {v!r}" for k, v in (("experiment", scope.experiment), ("phase", scope.phase)) if v)
        raise FaeError("the log holds no runs" + (f" of {what}" if what else ""))
    makers: dict[str, Callable[[], Table | None]] = {
        "overview": lambda: tables.overview(log, scope),
        "success": lambda: tables.success(log, scope),
        "success_ci": lambda: derived.success_ci(log, scope),
        "pass_k": lambda: derived.pass_k(log, scope),
        "variance": lambda: tables.variance(log, scope),
        "paired": lambda: derived.paired(log, scope, pairs),
        "tool_errors_by_tool": lambda: tables.tool_errors(log, scope, "tool"),
        "tool_errors_by_resource_type": lambda: tables.tool_errors(log, scope, "resource_type"),
        "failure_modes": lambda: tables.failure_modes(log, scope),
        "calls_vs_expected": lambda: tables.calls_vs_expected(log, scope),
        "tokens": lambda: tables.tokens(log, scope),
        "token_cv": lambda: tables.token_cv(log, scope),
        "harms": lambda: tables.harms(log, scope),
        "cost": lambda: cost.cost(log, scope, prices or shipped_prices()),
    }
    unknown = sorted((only or set()) - set(makers))
    if unknown:
        raise FaeError(f"no table {unknown[0]!r}; tables: {', '.join(makers)}")
    wanted = [name for name in makers if not only or name in only or name == "overview"]
    order = [name for name in wanted if name == "overview" or name in first]
    order += [name for name in wanted if name not in order]
    total = len(order) + extra_steps

    def make(name: str) -> Table | None:
        if on_step is not None:
            on_step(order.index(name), total, name)
        return makers[name]()

    made = {name: make(name) for name in wanted if name == "overview" or name in first}
    shared_model = _shared_model(made["overview"])
    if ready:
        ready(Study(scope, {n: t for n, t in made.items() if t is not None}, shared_model))
    made.update((name, make(name)) for name in wanted if name not in made)
    return Study(scope, {n: t for n in wanted if (t := made[n]) is not None}, shared_model)


def _shared_model(overview: Table | None) -> str | None:
    """The model every configuration names (``…@MODEL``), if they all share one."""
    names = {str(r[2]) for r in overview.rows} if overview else set()
    models = {n.rpartition("@")[2] for n in names if "@" in n}
    return models.pop() if len(models) == 1 and all("@" in n for n in names) else None
