"""The study's runs computed once: ``run_results`` of the scope kept in a temp table for every table and figure.

Each table's SQL still names ``run_results`` (so `fae sql` reproduces it); only its execution reads the
temp table. A live reader (another process is recording) has no cursor of its own and runs it as written.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import duckdb

from fae.errors import StoreError
from fae.report.scope import Queryable, Scope
from fae.store.log import EventLog

CACHED = "study_scope"


class CachedScope:
    """A Queryable whose ``scope`` CTE reads a temp table made once on one cursor."""

    def __init__(self, cursor: duckdb.DuckDBPyConnection, scope: Scope):
        self.cursor = cursor
        self.written = scope.cte()
        self.cached = f"scope AS (SELECT * FROM {CACHED})"
        cursor.execute(f"CREATE OR REPLACE TEMP TABLE {CACHED} AS SELECT * FROM run_results WHERE {scope.where()}")

    def query(self, sql: str, params: list[Any] | None = None) -> tuple[list[str], list[tuple]]:
        try:
            result = self.cursor.execute(sql.replace(self.written, self.cached), params or [])
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
