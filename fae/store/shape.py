"""A log's catalogue checked against the one fae makes, before anything in it is read.

A log may come from someone else. Its ``runs`` could be a view over
``read_text('/etc/…')``, a macro named like a DuckDB function could stand in for
it in every query fae runs, a column could be of another type. So before a log
is used, its catalogue (DuckDB's own ``duckdb_tables()``, ``duckdb_columns()``,
``duckdb_constraints()``, ``duckdb_views()``, ``duckdb_types()``,
``duckdb_functions()``) is compared with the one fae's migrations make, built
once per process in an in-memory database:

- each of fae's tables is a base table with exactly fae's columns (name, type,
  nullability, default) and constraints, in order;
- where fae keeps a view there is no table; opened read-only, each of fae's
  views is the one this fae defines (a writer recreates them);
- the log defines no macro and no type (fae never makes one, and one in the
  log's schema shadows DuckDB's own function or type of that name).

Tables and views of other names may sit beside fae's: fae never reads them.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb

from fae.errors import SchemaTooNew, StoreError
from fae.store import schema
from fae.store.names import shown

VERSION_TABLE = "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER, applied_at TIMESTAMPTZ)"

Column = tuple[str, str, bool, str | None]
"""(name, type, nullable, default) as ``duckdb_columns()`` gives them."""


@dataclass(frozen=True, slots=True)
class Catalogue:
    """fae's tables (columns in order, constraints sorted) and views (their SQL as DuckDB renders it)."""

    tables: dict[str, tuple[Column, ...]]
    constraints: dict[str, tuple[tuple[str, str], ...]]
    views: dict[str, str]


def _catalogue(con: duckdb.DuckDBPyConnection, database: str, *, views: bool) -> Catalogue:
    """The catalogue of ``database`` (``views``: with its views' SQL)."""
    tables: dict[str, list[Column]] = {}
    for table, *column in con.execute(
        "SELECT table_name, column_name, data_type, is_nullable, column_default FROM duckdb_columns()"
        " WHERE database_name = $db AND schema_name = 'main' AND NOT internal"
        " AND table_name IN (SELECT table_name FROM duckdb_tables() WHERE database_name = $db AND schema_name = 'main')"
        " ORDER BY table_name, column_index",
        {"db": database},
    ).fetchall():
        tables.setdefault(table, []).append(tuple(column))
    constraints: dict[str, list[tuple[str, str]]] = {}
    for table, kind, text in con.execute(
        "SELECT table_name, constraint_type, constraint_text FROM duckdb_constraints()"
        " WHERE database_name = ? AND schema_name = 'main'",
        [database],
    ).fetchall():
        constraints.setdefault(table, []).append((kind, text))
    found = {}
    if views:
        found = dict(
            con.execute(
                "SELECT view_name, sql FROM duckdb_views() WHERE database_name = ? AND schema_name = 'main'"
                " AND NOT internal",
                [database],
            ).fetchall()
        )
    return Catalogue(
        {name: tuple(columns) for name, columns in tables.items()},
        {name: tuple(sorted(kinds)) for name, kinds in constraints.items()},
        found,
    )


@functools.cache
def expected(views: bool = False) -> Catalogue:
    """The catalogue fae's migrations make (``views``: with this fae's views), built once in memory."""
    con = duckdb.connect(":memory:")
    try:
        con.execute(VERSION_TABLE)
        for migration in schema.MIGRATIONS:
            con.execute(migration)
        if views:
            for name, sql in schema.VIEWS.items():
                con.execute(f"CREATE VIEW {name} AS {sql}")
        (database,) = con.execute("SELECT current_database()").fetchall()[0]
        return _catalogue(con, database, views=views)
    finally:
        con.close()


def _kinds(con: duckdb.DuckDBPyConnection, database: str) -> list[tuple[str, str, str]]:
    """(kind, schema, name) of every table, view, macro and type the log itself defines."""
    return con.execute(
        "SELECT 'table', schema_name, table_name FROM duckdb_tables() WHERE database_name = $db"
        " UNION ALL SELECT 'view', schema_name, view_name FROM duckdb_views() WHERE database_name = $db"
        " AND NOT internal"
        " UNION ALL SELECT 'type', schema_name, type_name FROM duckdb_types() WHERE database_name = $db"
        " AND NOT internal"
        " UNION ALL SELECT 'macro', schema_name, function_name FROM duckdb_functions() WHERE database_name = $db"
        " AND NOT internal",
        {"db": database},
    ).fetchall()


def quoted(name: str) -> str:
    """A DuckDB identifier (a database's name is its file's stem, which may hold anything)."""
    return '"' + name.replace('"', '""') + '"'


def _not_fae(path: Path, what: str) -> StoreError:
    return StoreError(f"log {path} is not as fae makes it: {what}; fae reads no further")


def check_kinds(con: duckdb.DuckDBPyConnection, path: Path, database: str) -> list[str]:
    """fae's tables are base tables, fae's views are not tables, no macro or type is defined; the file's tables.

    Any version's: a view named like a table fae adds in a later migration is refused as well."""
    ours = set(expected().tables)
    views = set(schema.VIEWS)
    tables = []
    for kind, schema_name, name in _kinds(con, database):
        if kind == "table":
            tables.append(name)
        if kind in ("macro", "type"):
            raise _not_fae(path, f"it defines a {kind} {shown(schema_name + '.' + name)} (fae never makes one)")
        if schema_name != "main":
            continue
        if kind == "view" and name in ours:
            raise _not_fae(path, f"its {name} is a view, where fae keeps a table")
        if kind == "table" and name in views:
            raise _not_fae(path, f"its {name} is a table, where fae keeps a view")
    return tables


def _column_text(column: Column) -> str:
    name, kind, nullable, default = column
    return f"{name} {kind}{'' if nullable else ' NOT NULL'}{f' DEFAULT {default}' if default is not None else ''}"


def check_shape(
    con: duckdb.DuckDBPyConnection, path: Path, database: str, *, views: bool, found: Catalogue | None = None
) -> None:
    """The log's tables are fae's at the latest version (and, with ``views``, so are its views' definitions).

    After ``check_kinds``, which this does not repeat (its macro lookup is most of a check's cost). ``found``:
    the log's catalogue when the caller read it already (with views, if ``views``)."""
    want = expected(views)
    found = found or _catalogue(con, database, views=views)
    for table, columns in want.tables.items():
        have = found.tables.get(table)
        if have is None:
            raise _not_fae(path, f"it has no table {table}")
        if have != columns:
            pairs = zip(have, columns, strict=False)  # a missing or extra column: the count says so
            wrong = next(
                (f"column {_column_text(h)}, where fae has {_column_text(w)}" for h, w in pairs if h != w),
                f"{len(have)} columns, where fae has {len(columns)}",
            )
            raise _not_fae(path, f"its table {table} has {shown(wrong, 200)[1:-1]}")
        if found.constraints.get(table, ()) != want.constraints.get(table, ()):
            raise _not_fae(path, f"its table {table} has other constraints than fae's")
    if views:
        for name, sql in want.views.items():
            if found.views.get(name) != sql:
                raise StoreError(
                    f"log {path}'s view {name} is not the one this fae defines (the log was last written by "
                    f"another fae, or edited); `fae migrate --log {path}` recreates fae's views"
                )


def checked_version(
    con: duckdb.DuckDBPyConnection, path: Path, database: str, *, views: bool = False
) -> tuple[int, Catalogue]:
    """``check_kinds``, then the log's schema version (``stored_version``) and its catalogue (``views``: with them)."""
    tables = check_kinds(con, path, database)
    found = _catalogue(con, database, views=views)
    return stored_version(con, path, database, tables, found), found


def stored_version(
    con: duckdb.DuckDBPyConnection, path: Path, database: str, tables: Sequence[str], found: Catalogue
) -> int:
    """The log's schema version: 0 for a new file; a StoreError for another program's file or a bad version.

    ``tables``: the names of the tables the file holds (``check_kinds`` returns them); ``found``: its catalogue."""
    names = set(tables)
    if "schema_version" not in names:
        if names:  # someone else's database: fae's tables never go in beside theirs
            raise StoreError(
                f"{path} is a DuckDB file with other tables and no fae schema, not a fae log; record into a new file"
            )
        return 0
    if found.tables.get("schema_version") != expected().tables["schema_version"]:
        raise _not_fae(path, "its schema_version is not a table of fae's shape")
    (version,) = con.execute(f"SELECT max(version) FROM {quoted(database)}.main.schema_version").fetchall()[0]
    if version is None and names == {"schema_version"}:
        return 0  # a first open that stopped before its first migration committed
    if version is None or version < 1:
        raise _not_fae(path, f"its schema_version holds no valid version ({shown(version)})")
    if version > schema.LATEST_VERSION:
        raise SchemaTooNew(
            f"log {path} has schema version {version}, newer than this fae understands "
            f"({schema.LATEST_VERSION}); upgrade fae to read it"
        )
    return int(version)
