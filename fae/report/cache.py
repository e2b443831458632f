"""The study's shared rows computed once: the scope's ``run_results`` (and its agent tool calls) in temp tables.

Each table's SQL still names ``run_results`` and writes its CTEs out (so `fae sql` reproduces it); only its
execution reads the temp tables. A shared CTE is materialised the first time a query names it, so a study
that never asks for it (`fae stats -t success`) does not pay for it. A live reader (another process is
recording) has no cursor of its own and runs every query as written.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import duckdb

from fae.errors import StoreError
from fae.report.scope import TOOL_CALLS, Queryable, Scope
from fae.store.log import EventLog

CACHED = "study_scope"
SHARED = {"study_tool_calls": TOOL_CALLS}
"""Temp table → the CTE (after the scope's) it stands in for."""


class CachedScope:
    """A Queryable whose ``scope`` CTE (and the SHARED ones) read temp tables made once on one cursor."""

    def __init__(self, cursor: duckdb.DuckDBPyConnection, scope: Scope):
        self.cursor = cursor
        self.written = scope.cte()
        self.cached = f"scope AS (SELECT * FROM {CACHED})"
        self.made: set[str] = set()
        # in run_id order: the tables' float aggregates then add in one order every time (same log, same bytes)
        cursor.execute(f"CREATE OR REPLACE TEMP TABLE {CACHED} AS {scope.select()} ORDER BY run_id")

    def query(self, sql: str, params: list[Any] | None = None) -> tuple[list[str], list[tuple]]:
        try:
            sql = sql.replace(self.written, self.cached)
            for table, cte in SHARED.items():
                if cte in sql:
                    name = cte.partition(" AS (")[0]
                    if table not in self.made:
                        self.cursor.execute(
                            f"CREATE OR REPLACE TEMP TABLE {table} AS WITH {self.cached}, {cte} SELECT * FROM {name}"
                        )
                        self.made.add(table)
                    sql = sql.replace(cte, f"{name} AS (SELECT * FROM {table})")
            result = self.cursor.execute(sql, params or [])
            return [d[0] for d in result.description or []], result.fetchall()
        except duckdb.Error as exc:
            raise StoreError(f"study query failed: {exc}") from None


@contextmanager
def cached_scope(log: Queryable, scope: Scope) -> Iterator[Queryable]:
    """``log`` with the scope's runs computed once (a log file), or ``log`` itself (a live reader)."""
    if not isinstance(log, EventLog):
        yield log
        return
    cursor = log.cursor()
    try:
        yield CachedScope(cursor, scope)
    finally:
        cursor.close()
