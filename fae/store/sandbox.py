"""Read-only SQL over a log: which statements may run, on a locked connection, within budgets.

A statement is judged by DuckDB's own parser and planner, never by patterns
over its text: exactly one statement, of a reading kind, whose parse tree has
no data-modifying node (a ``WITH d AS (DELETE … RETURNING …)`` parses as a
SELECT) and whose plan has no writing operator. The connection that runs it
has file and network access off, extension auto-install/auto-load off and its
configuration locked, so ``read_text('/etc/…')``, a URL or ``SET`` fail there
even if a statement slipped through.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from fae.errors import StoreError, first_line

# query-node types a reading statement's parse tree may hold (json_serialize_sql names)
_READING_NODES = frozenset({"SELECT_NODE", "SET_OPERATION_NODE", "RECURSIVE_CTE_NODE", "CTE_NODE"})
# physical operators that write, attach, load or change settings
_WRITING_OPERATORS = (
    "INSERT",
    "DELETE",
    "UPDATE",
    "CREATE",
    "COPY",
    "ALTER",
    "DROP",
    "ATTACH",
    "DETACH",
    "EXPORT",
    "LOAD",
    "PRAGMA",
    "SET",
    "RESET",
    "TRANSACTION",
    "VACUUM",
    "MERGE",
    "UPSERT",
    "CHECKPOINT",
)
_parser_lock = threading.Lock()


@functools.cache
def _parser() -> duckdb.DuckDBPyConnection:
    """An in-memory connection that only parses; it never sees a log."""
    return duckdb.connect(":memory:")


@dataclass(frozen=True, slots=True)
class Budget:
    """What one query may cost: wall time, rows, bytes of cell data, DuckDB memory."""

    time_s: float = 30.0
    max_rows: int = 100_000
    max_bytes: int = 64 * 1024 * 1024  # a recorded body (32 MiB by default) still fits
    memory_limit: str = "1GB"

    @property
    def settings(self) -> dict[str, str | int]:
        """The DuckDB settings a log's connection is opened with for queries within this budget."""
        return {"memory_limit": self.memory_limit}


def _tokens(sql: str) -> list[tuple[int, str]]:
    """DuckDB's own tokens of ``sql`` as (offset, type name), comments dropped."""
    return [(offset, kind.name) for offset, kind in duckdb.tokenize(sql) if kind.name != "comment"]


def _node_types(tree: Any) -> Iterator[str]:
    if isinstance(tree, dict):
        kind = tree.get("type")
        if isinstance(kind, str) and kind.endswith("_NODE"):
            yield kind
        for value in tree.values():
            yield from _node_types(value)
    elif isinstance(tree, list):
        for value in tree:
            yield from _node_types(value)


def _check_select(sql: str) -> None:
    with _parser_lock:
        (serialized,) = _parser().execute("SELECT json_serialize_sql(?)", [sql]).fetchall()[0]
    tree = json.loads(serialized)
    if tree.get("error"):
        raise StoreError(f"only plain queries can run here: {first_line(str(tree.get('error_message')))}")
    modifying = sorted({t for t in _node_types(tree) if t not in _READING_NODES})
    if modifying:
        raise StoreError(f"the query modifies data ({', '.join(modifying)}); only reading is allowed")


def check_query(sql: str) -> None:
    """Refuse anything but one statement that only reads: raises StoreError saying why."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise StoreError(f"bad SQL: {first_line(exc)}") from None
    if len(statements) != 1:
        raise StoreError(f"give exactly one SQL statement (got {len(statements)})")
    statement = statements[0]
    if statement.type == duckdb.StatementType.EXPLAIN:
        tokens = _tokens(sql)
        if len(tokens) < 2 or tokens[1][1] != "keyword" or sql[tokens[1][0] :].upper().startswith("ANALYZE"):
            raise StoreError(
                "EXPLAIN ANALYZE and EXPLAIN options run or reshape the statement; use plain EXPLAIN SELECT …"
            )
        inner = sql[tokens[1][0] :]
        check_query(inner)
        return
    if statement.type != duckdb.StatementType.SELECT:
        raise StoreError(
            f"only queries can run on a log (got {statement.type.name}); "
            f"SELECT, DESCRIBE, SHOW, SUMMARIZE and EXPLAIN are allowed"
        )
    _check_select(sql)


def lock_down(
    con: duckdb.DuckDBPyConnection,
    memory_limit: str | None = None,
    *,
    settings: Mapping[str, str | int] | None = None,
    folders: Sequence[Path] = (),
    files: Sequence[Path] = (),
) -> None:
    """No files, no network, no extension installs, then no more settings changes.

    Before the lock: ``memory_limit`` and ``settings`` (DuckDB settings from fae's code, never from a log), and
    the ``folders`` and ``files`` the connection may still read and write (fae's choice, never a log's).
    On a database this process has open and locked already, the lock stands and these are left as they are.
    """
    statements: list[tuple[str, list[Any]]] = [
        (f"SET {name} = ?", [value]) for name, value in {**(settings or {}), **_memory(memory_limit)}.items()
    ]
    if folders:
        statements.append(("SET allowed_directories = ?", [[str(p.resolve()) + "/" for p in folders]]))
    if files:
        statements.append(("SET allowed_paths = ?", [[str(p.resolve()) for p in files]]))
    statements += [
        ("SET enable_external_access = false", []),
        ("SET autoinstall_known_extensions = false", []),
        ("SET autoload_known_extensions = false", []),
        ("SET lock_configuration = true", []),
    ]
    for setting, params in statements:
        try:
            con.execute(setting, params)
        except duckdb.Error as exc:
            if "configuration has been locked" not in str(exc):
                raise StoreError(f"cannot lock down the log connection: {first_line(exc)}") from None


def _memory(limit: str | None) -> dict[str, str]:
    return {"memory_limit": limit} if limit else {}


def _operators(plan: Any) -> Iterator[str]:
    if isinstance(plan, dict):
        if isinstance(plan.get("name"), str):
            yield plan["name"]
        for child in plan.get("children") or []:
            yield from _operators(child)
    elif isinstance(plan, list):
        for item in plan:
            yield from _operators(item)


def _check_plan(cursor: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] | None) -> None:
    if duckdb.extract_statements(sql)[0].type != duckdb.StatementType.SELECT:
        return  # a plain EXPLAIN's inner statement was checked as a SELECT already
    rows = cursor.execute("EXPLAIN (FORMAT json) " + sql, params or []).fetchall()
    for _, plan in rows:
        for name in _operators(json.loads(plan)):
            if any(word in name.upper().split("_") for word in _WRITING_OPERATORS):
                raise StoreError(f"the query's plan writes ({name}); only reading is allowed")


def _size(value: Any) -> int:
    if isinstance(value, (str, bytes, bytearray, memoryview)):
        return len(value)
    if isinstance(value, (list, tuple)):
        return 8 + sum(_size(v) for v in value)
    if isinstance(value, dict):
        return 8 + sum(_size(k) + _size(v) for k, v in value.items())
    return 8


def run_query(
    cursor: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] | None, budget: Budget | None
) -> tuple[list[str], list[tuple]]:
    """Check and run one read query on ``cursor`` (a locked-down connection), within ``budget``."""
    check_query(sql)
    timer = None
    if budget is not None:
        timer = threading.Timer(budget.time_s, cursor.interrupt)
        timer.daemon = True
        timer.start()
    try:
        _check_plan(cursor, sql, params)
        result = cursor.execute(sql, params or [])
        columns = [d[0] for d in result.description or []]
        if budget is None:
            return columns, result.fetchall()
        rows: list[tuple] = []
        size = 0
        while batch := result.fetchmany(1024):
            rows.extend(batch)
            size += sum(_size(row) for row in batch)
            if len(rows) > budget.max_rows:
                raise StoreError(f"the result has more than {budget.max_rows} rows; add a LIMIT or aggregate")
            if size > budget.max_bytes:
                raise StoreError(
                    f"the result is over {budget.max_bytes // (1024 * 1024)} MiB; select fewer or smaller columns"
                )
        return columns, rows
    except duckdb.InterruptException:
        raise StoreError(
            f"the query ran past its {budget.time_s:g} s budget and was cancelled"
            if budget
            else "the query was interrupted"
        ) from None
    except duckdb.OutOfMemoryException:
        raise StoreError(
            f"the query needs more than its {budget.memory_limit if budget else ''} memory budget "
            f"and was cancelled; add a LIMIT or aggregate"
        ) from None
    except duckdb.PermissionException as exc:
        raise StoreError(f"not allowed here: {first_line(exc)}") from None
    except duckdb.Error as exc:
        raise StoreError(f"bad SQL: {first_line(exc)}") from None
    finally:
        if timer is not None:
            timer.cancel()
