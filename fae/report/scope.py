"""Which runs a study covers, written as SQL a user can paste into `fae sql`, and the tables and figures it yields."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


class Queryable(Protocol):
    def query(self, sql: str, params: list[Any] | None = None) -> tuple[list[str], list[tuple]]: ...


def literal(text: str) -> str:
    """A SQL string literal (quotes doubled), so the SQL shown beside a table runs as it is."""
    return "'" + text.replace("'", "''") + "'"


@dataclass(frozen=True)
class Scope:
    """The runs of one experiment (or all) and one phase (or all), as counted by ``run_results``."""

    experiment: str | None = None
    phase: str | None = None
    pooled: bool = False
    """One group per configuration over every experiment and phase in scope (as the reference paper pools its
    four experiments): experiment and phase read NULL, so every table and figure groups by configuration alone."""

    def where(self) -> str:
        terms = []
        if self.experiment is not None:
            terms.append(f"experiment = {literal(self.experiment)}")
        if self.phase is not None:
            terms.append(f"phase = {literal(self.phase)}")
        return " AND ".join(terms) or "true"

    def cte(self) -> str:
        """``scope``: the run_results rows in this study."""
        return f"scope AS ({self.select()})"

    def select(self) -> str:
        """The query of the scope's rows."""
        columns = "* REPLACE (NULL::VARCHAR AS experiment, NULL::VARCHAR AS phase)" if self.pooled else "*"
        return f"SELECT {columns} FROM run_results WHERE {self.where()}"


KEYS = "experiment, phase, configuration"

# the agent's tool calls of the runs in scope, one row each: a CTE both tool-error tables name (so a study
# materialises it once, fae.report.cache) after the scope CTE
TOOL_CALLS = """calls AS (  -- each payload parsed once, for the three fields together
    SELECT s.experiment, s.phase, s.configuration, f[1] AS tool, coalesce(f[2], '(none)') AS resource_type,
           CAST(f[3] AS BOOLEAN) AS is_error
    FROM scope s
    JOIN (SELECT run_id, json_extract_string(payload, ['$.tool', '$.arguments.resourceType', '$.is_error']) AS f
          FROM events WHERE kind = 'ToolCalled' AND actor = 'agent') c ON c.run_id = s.run_id)"""


@dataclass
class Table:
    """One result table: its rows, the SQL that produced them (or their inputs), and how to read it."""

    name: str
    title: str
    sql: str
    columns: list[str]
    rows: list[tuple]
    note: str = ""
    formats: dict[str, str] = field(default_factory=dict)
    unknown: tuple[str, ...] = ()
    """Columns whose NULL means a value fae cannot know (tokens of an API it does not read): shown as unknown."""

    def dicts(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


# every figure of the report, in its order (each drawn where the study's data allows)
FIGURES = (
    "fig-success",
    "fig-success-light-writes",
    "fig-success-difficulty",
    "fig-success-family",
    "fig-pass-k",
    "fig-variance-share",
    "fig-variance",
    "fig-tool-errors-tool",
    "fig-tool-errors",
    "fig-failure-modes",
    "fig-calls",
    "fig-calls-excess",
    "fig-tokens",
    "fig-tokens-difficulty",
    "fig-tokens-outcome",
    "fig-tokens-calls",
    "fig-token-cv",
    "fig-cost",
)

# the study's tables the figures read (with the overview), computed first so that drawing can start
FIGURE_TABLES = (
    "success",
    "pass_k",
    "variance",
    "tool_errors_by_tool",
    "tool_errors_by_resource_type",
    "failure_modes",
    "token_cv",
    "cost",
)


@dataclass(frozen=True)
class Figure:
    """One figure of the report: its id, caption, the SQL behind it and the drawing (inline SVG)."""

    name: str
    title: str
    sql: str
    svg: str


def run_sql(
    log: Queryable,
    name: str,
    title: str,
    sql: str,
    note: str = "",
    formats: dict[str, str] | None = None,
    unknown: tuple[str, ...] = (),
) -> Table:
    columns, rows = log.query(sql)
    steady = [tuple(map(_steady, row)) for row in rows]
    return Table(name, title, sql.strip(), columns, steady, note, formats or {}, unknown)


def _steady(value: Any) -> Any:
    """A float to 12 significant digits: DuckDB aggregates in parallel, so an average or a variance can differ
    in its last bit between two runs over the same log; the tables (and ``fae stats --json``) must not."""
    return float(f"{value:.12g}") if isinstance(value, float) else value
