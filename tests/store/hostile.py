"""A corpus of hostile logs, each an honest recorded log edited by hand in DuckDB the way an attacker would.

Each builder gets a plain DuckDB connection to its own copy of the honest log (no sandbox: this is the attacker's
side) and the canary file, whose content must never reach any output. ``HOSTILE`` names them all; ``build``
makes one.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import duckdb
import zstandard

CANARY_TEXT = "fae-canary-5e1f0b9c-never-shown"
GIANT = 4 * 1024 * 1024
ESCAPING_HASH = "..x/../../escape"
"""A blob hash as a path: from a log's body folder it names ``<the log's folder>/../escape.zst``; from an export's
``bodies/`` (``DIR/bodies/../x/../../escape.zst``) it names ``escape.zst`` beside ``DIR``."""

Builder = Callable[[duckdb.DuckDBPyConnection, Path], None]


def _read_canary(canary: Path) -> str:
    return f"(SELECT content FROM read_text('{canary}'))"


def _columns(con: duckdb.DuckDBPyConnection, table: str) -> list[str]:
    return [
        c
        for (c,) in con.execute(
            "SELECT column_name FROM duckdb_columns() WHERE table_name = ? ORDER BY column_index", [table]
        ).fetchall()
    ]


def _as_view(table: str, column: str) -> Builder:
    """``table`` becomes a view over its old rows, ``column`` replaced by the canary file's content."""

    def build(con: duckdb.DuckDBPyConnection, canary: Path) -> None:
        columns = _columns(con, table)
        con.execute(f"CREATE TABLE {table}_rows AS SELECT * FROM {table}")
        con.execute(f"DROP TABLE {table}")
        shown = ", ".join(_read_canary(canary) + f" AS {c}" if c == column else c for c in columns)
        con.execute(f"CREATE VIEW {table} AS SELECT {shown} FROM {table}_rows")

    return build


def _macro(con: duckdb.DuckDBPyConnection, canary: Path) -> None:
    con.execute(f"CREATE MACRO json_extract_string(j, p) AS {_read_canary(canary)}")


def _table_macro(con: duckdb.DuckDBPyConnection, canary: Path) -> None:
    con.execute(f"CREATE MACRO leak() AS TABLE SELECT content FROM read_text('{canary}')")


def _user_type(con: duckdb.DuckDBPyConnection, canary: Path) -> None:
    con.execute("CREATE TYPE json AS VARCHAR")


def _wrong_type(con: duckdb.DuckDBPyConnection, canary: Path) -> None:
    con.execute("ALTER TABLE runs ALTER variation TYPE VARCHAR")


def _extra_column(con: duckdb.DuckDBPyConnection, canary: Path) -> None:
    con.execute("ALTER TABLE verdicts ADD COLUMN note VARCHAR DEFAULT 'x'")


def _missing_table(con: duckdb.DuckDBPyConnection, canary: Path) -> None:
    con.execute("DROP TABLE task_meta")


def _fae_view_replaced(con: duckdb.DuckDBPyConnection, canary: Path) -> None:
    con.execute(
        "CREATE OR REPLACE VIEW run_summary AS SELECT run_id, task_id, variation, agent, repeat, status, stop_reason,"
        " started_at, ended_at, 0 AS duration_ms, 0 AS events, 0 AS fhir_exchanges, 0 AS llm_calls, 0 AS tool_calls,"
        f" 0 AS total_tokens, {_read_canary(canary)} AS answer FROM runs"
    )


def _table_for_view(con: duckdb.DuckDBPyConnection, canary: Path) -> None:
    con.execute("DROP VIEW run_summary")
    con.execute("CREATE TABLE run_summary AS SELECT * FROM runs")


def _future(con: duckdb.DuckDBPyConnection, canary: Path) -> None:
    con.execute("INSERT INTO schema_version VALUES (99, now())")


def _bad_version(con: duckdb.DuckDBPyConnection, canary: Path) -> None:
    con.execute("DELETE FROM schema_version")
    con.execute("INSERT INTO schema_version VALUES (-3, now())")


def _older(con: duckdb.DuckDBPyConnection, canary: Path) -> None:
    """Taken back to schema 7, as a fae from before side files and kept findings left it."""
    con.execute("DROP TABLE judge_facts")
    con.execute("ALTER TABLE blobs DROP COLUMN external")
    con.execute("DELETE FROM schema_version WHERE version >= 8")


def _numbers(con: duckdb.DuckDBPyConnection, canary: Path) -> None:
    """NaN, infinities and negative numbers where fae writes counts, sizes and durations."""
    con.execute("UPDATE runs SET variation = -1, repeat = -5 WHERE run_id = (SELECT min(run_id) FROM runs)")
    con.execute("UPDATE blobs SET size = -1")
    con.execute("UPDATE task_meta SET difficulty = -7, min_tool_calls = -1, gold_calls = -2")
    con.execute(
        'UPDATE events SET payload = replace(CAST(payload AS VARCHAR), \'"duration_ms":\', \'"duration_ms":NaN,"x":\')'
        " WHERE kind = 'HttpExchanged'"
    )
    con.execute(
        "UPDATE events SET payload = replace(CAST(payload AS VARCHAR), '\"resource_count\":',"
        " '\"resource_count\":-1e999,\"y\":') WHERE kind = 'StateCaptured'"
    )


def _giant(con: duckdb.DuckDBPyConnection, canary: Path) -> None:
    """A 4 MiB answer and a 4 MiB error: more than any screen, less than a test's memory."""
    text = "A" * GIANT
    con.execute(
        "UPDATE events SET payload = ? WHERE kind = 'AnswerGiven' AND run_id = (SELECT min(run_id) FROM runs)",
        [json.dumps({"type": "AnswerGiven", "text": text, "stop_reason": "answered"})],
    )
    con.execute("UPDATE runs SET error = ? WHERE run_id = (SELECT max(run_id) FROM runs)", [text])


def _escaping_hash(con: duckdb.DuckDBPyConnection, canary: Path) -> None:
    """A body "kept in a side file" whose hash walks out of the body folder, to a file that is there."""
    con.execute("INSERT INTO blobs VALUES (?, 10, ''::BLOB, true)", [ESCAPING_HASH])
    planted = canary.parent / "escape.zst"
    planted.write_bytes(zstandard.ZstdCompressor().compress(CANARY_TEXT.encode()))


def _escaping_seed(con: duckdb.DuckDBPyConnection, canary: Path) -> None:
    """As ``_escaping_hash``, and a run's seed bundle is that body: judging or replaying it reads the body."""
    _escaping_hash(con, canary)
    con.execute(
        "UPDATE events SET payload = json_merge_patch(payload, json_object('seed_blob', ?))"
        " WHERE kind = 'SandboxSeeded' AND run_id = (SELECT max(run_id) FROM runs)",
        [ESCAPING_HASH],
    )


def _path_ids(con: duckdb.DuckDBPyConnection, canary: Path) -> None:
    """Run ids, suites and experiments with ``/`` and ``..``: the first run is renamed everywhere it is named."""
    (old,) = con.execute("SELECT min(run_id) FROM runs").fetchall()[0]
    new = "../../" + old.replace(".", "/")
    for table in ("runs", "events", "verdicts"):
        con.execute(f"UPDATE {table} SET run_id = ? WHERE run_id = ?", [new, old])
    con.execute("UPDATE runs SET suite = '../../../outside', experiment = 'a/../../b'")


def _control_suite(con: duckdb.DuckDBPyConnection, canary: Path) -> None:
    con.execute("UPDATE runs SET suite = 'suite\n\x1b]0;title\x07'")


def _extra_view(con: duckdb.DuckDBPyConnection, canary: Path) -> None:
    """A view of its own beside fae's, reading the canary: fae never reads it, and ``fae sql`` may not run it."""
    con.execute(f"CREATE VIEW leak AS SELECT {_read_canary(canary)} AS content")


HOSTILE: dict[str, Builder] = {
    "runs-view": _as_view("runs", "error"),
    "events-view": _as_view("events", "actor"),
    "verdicts-view": _as_view("verdicts", "outcome"),
    "schema-version-view": _as_view("schema_version", "applied_at"),
    "facts-view": _as_view("judge_facts", "facts"),
    "shadowing-macro": _macro,
    "table-macro": _table_macro,
    "user-type": _user_type,
    "wrong-type": _wrong_type,
    "extra-column": _extra_column,
    "missing-table": _missing_table,
    "fae-view-replaced": _fae_view_replaced,
    "table-for-view": _table_for_view,
    "future": _future,
    "bad-version": _bad_version,
    "older": _older,
    "numbers": _numbers,
    "giant": _giant,
    "escaping-hash": _escaping_hash,
    "escaping-seed": _escaping_seed,
    "path-ids": _path_ids,
    "control-suite": _control_suite,
    "extra-view": _extra_view,
}
"""Every hostile log by name."""


def build(honest: Path, name: str, folder: Path, canary: Path) -> Path:
    """A copy of the honest log in ``folder``, edited by ``HOSTILE[name]``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.duckdb"
    shutil.copy(honest, path)
    con = duckdb.connect(str(path))
    try:
        HOSTILE[name](con, canary)
        con.execute("CHECKPOINT")
    finally:
        con.close()
    return path
