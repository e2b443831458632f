"""A log from someone else is untrusted input: every command that opens one refuses a hostile log in one line,
or works on its honest part, and reads or writes nothing outside the log and its own output.

The corpus (tests/store/hostile.py) is an honest recording edited by hand: views and macros in place of fae's
tables, wrong types, NaN, infinities and negative numbers, giant payloads, a schema version from the future,
hashes and ids with ``/`` and ``..``. Each is built once per module; each test runs one command on a fresh copy,
with a canary file whose content must appear in no output and no file written, and a listing of everything
around the log before and after.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import duckdb
import pytest
import zstandard
from typer.testing import CliRunner

from fae.cli import app

sys.path.insert(0, str(Path(__file__).parent))

from hostile import CANARY_TEXT, ESCAPING_HASH, HOSTILE, build

runner = CliRunner()

COMMANDS: dict[str, list[str]] = {
    "runs": ["runs", "--log", "{log}"],
    "info": ["log", "info", "{log}"],
    "show": ["show", "{run}", "--log", "{log}"],
    "sql": ["sql", "SELECT run_id, status, error FROM runs", "--log", "{log}"],
    "stats": ["stats", "--log", "{log}"],
    "report": ["report", "--log", "{log}", "--output", "{out}/report.html"],
    "export": ["export", "--parquet", "{out}/export", "--log", "{log}"],
    "otel": ["export", "--otel", "{out}/traces.jsonl", "--otel-content", "--log", "{log}"],
    "merge": ["log", "merge", "{log}", "--into", "{out}/merged.duckdb"],
    # --full: every run judged from its events (an incremental rejudge leaves the log's own verdicts standing)
    "rejudge": ["rejudge", "--full", "--log", "{log}", "--workers", "1"],
    # --from-events: every missing verdict judged from the events (kept findings would decide without reading them)
    "compare": ["compare", "--old", "", "--new", "accept_corrections=false", "--log", "{log}", "--workers", "1"]
    + ["--from-events"],
    "replay": ["replay", "{run}", "--log", "{log}", "--out", "{out}/replay.duckdb"],
    "migrate": ["migrate", "--log", "{log}"],
    "curate": ["curate", "--log", "{log}"],
    "record": ["record", "--resume", "--log", "{log}", "--task", "builtin-create-patient", "--variations", "0-1"],
    "paraphrase": ["paraphrase", "export", "--log", "{log}", "-o", "{out}/paraphrases.yaml"],
}
READ_ONLY = {"runs", "info", "show", "sql", "export", "otel", "compare", "replay", "paraphrase"}
"""Commands that open the log read-only (the others open it for writing, which migrates it and recreates views)."""

REFUSED = {
    "runs-view": "its runs is a view",
    "events-view": "its events is a view",
    "verdicts-view": "its verdicts is a view",
    "schema-version-view": "its schema_version is a view",
    "facts-view": "its judge_facts is a view",
    "shadowing-macro": "it defines a macro",
    "table-macro": "it defines a macro 'main.leak'",
    "user-type": "it defines a type",
    "wrong-type": "its table runs has column variation VARCHAR",
    "extra-column": "its table verdicts has",
    "missing-table": "it has no table task_meta",
    "table-for-view": "its run_summary is a table",
    "future": "newer than this fae understands",
    "bad-version": "holds no valid version",
}
"""Logs every command refuses, and what the one line says."""
REFUSED_READ_ONLY = {
    "fae-view-replaced": "view run_summary is not the one this fae defines",
    "older": "older than this fae's",
}
"""Logs a command that only reads refuses (a writer migrates them, or recreates fae's views over theirs)."""
REFUSED_BY = {
    ("escaping-hash", "export"): "not a body hash",
    ("escaping-hash", "merge"): "not a body hash",
    ("control-suite", "export"): "cannot name a folder",
    **{("escaping-seed", c): "not a body hash" for c in ("export", "merge", "rejudge", "compare", "replay", "curate")},
    # a payload fae cannot decode stops those that decode every event, naming the run and the event
    **{("numbers", c): "event payload cannot be decoded" for c in ("rejudge", "compare", "replay", "curate", "otel")},
    # a resume re-records the spec whose run was renamed (or given another variation) under the id still taken
    ("numbers", "record"): "Duplicate key",
    ("path-ids", "record"): "Duplicate key",
}
"""One-line refusals of one command on a log whose other commands work on its honest part."""
PROGRESS = re.compile(r"[a-z]+: \d+/\d+( \(\d+%\).*)?")
"""A long command's progress line on stderr (fae/cli/progress.py)."""
NO_LLM = "give --llm-url"
"""What ``fae curate`` says on any log it reads: these runs have no soft verdict yet, and no judge was named."""
NO_PARAPHRASES = "holds no fixed paraphrases"
"""What ``fae paraphrase export`` says on any log of the corpus: the built-in task it records is never reworded."""


def refusal(name: str, command: str) -> str | None:
    """What fae must say when ``command`` refuses log ``name`` (in one line), or None when it must work."""
    if name in REFUSED:
        return REFUSED[name]
    if name in REFUSED_READ_ONLY and command in READ_ONLY:
        return REFUSED_READ_ONLY[name]
    quiet = {"curate": NO_LLM, "paraphrase": NO_PARAPHRASES}
    return REFUSED_BY.get((name, command)) or quiet.get(command)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """The honest recording and every hostile edit of it, built once; the canary beside them."""
    root = tmp_path_factory.mktemp("hostile")
    canary = root / "canary.txt"
    canary.write_text(CANARY_TEXT)
    honest = root / "honest" / "honest.duckdb"
    honest.parent.mkdir()
    recorded = runner.invoke(
        app, ["record", "--log", str(honest), "--task", "builtin-create-patient", "--variations", "0-1"]
    )
    assert recorded.exit_code == 0, recorded.output
    logs = {"honest": honest}
    for name in HOSTILE:
        logs[name] = build(honest, name, root / "built", canary)
    return logs


def _listing(root: Path) -> dict[str, tuple[int, int]]:
    """Every file (size, modification time) and folder (there or not) under ``root``."""
    found = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs:
            found[str(Path(folder) / name)] = (-1, 0)
        for name in files:
            stat = (Path(folder) / name).lstat()
            found[str(Path(folder) / name)] = (stat.st_size, stat.st_mtime_ns)
    return found


def _holds_canary(path: Path) -> bool:
    """Whether a file holds the canary's text, read the way its format is (compressed parts decompressed)."""
    if path.is_dir() or path.is_symlink():
        return False
    data = path.read_bytes()
    if CANARY_TEXT.encode() in data:
        return True
    if path.suffix == ".zst":
        try:
            return CANARY_TEXT.encode() in zstandard.ZstdDecompressor().stream_reader(data).read()
        except zstandard.ZstdError:
            return False
    if path.suffix == ".parquet":
        with duckdb.connect() as con:
            return CANARY_TEXT in repr(con.execute(f"SELECT * FROM read_parquet('{path}')").fetchall())
    if path.suffix == ".duckdb":
        return CANARY_TEXT in repr(_base_table_rows(path))
    return False


def _base_table_rows(path: Path) -> list:
    """Every row of every base table of a DuckDB file (never its views, which may read files), sandboxed."""
    with duckdb.connect(str(path), read_only=True) as con:
        con.execute("SET enable_external_access = false")
        tables = [t for (t,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()]
        return [con.execute(f'SELECT * FROM "{t}"').fetchall() for t in tables]


def _run(corpus, name: str, command: str, tmp_path: Path):
    """Run ``command`` on a fresh copy of log ``name``: the result, the log, and what changed around it."""
    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / f"{name}.duckdb"
    shutil.copy(corpus[name], log)
    # a file an escaping hash could reach from the log's body folder: "kept" there by whoever sent the log
    (tmp_path / "escape.zst").write_bytes(zstandard.ZstdCompressor().compress(CANARY_TEXT.encode()))
    out = tmp_path / "out" / command
    out.mkdir(parents=True)
    run_id = "builtin-create-patient.v1.gold.r0"
    argv = [a.format(log=log, out=out, run=run_id) for a in COMMANDS[command]]
    before = _listing(tmp_path)
    result = runner.invoke(app, argv)
    after = _listing(tmp_path)
    changed = sorted(p for p in after if after[p] != before.get(p)) + sorted(p for p in before if p not in after)
    return result, log, out, changed


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("name", ["honest", *HOSTILE])
def test_a_hostile_log_is_refused_in_one_line_or_read_for_its_honest_part(corpus, name, command, tmp_path):
    result, log, out, changed = _run(corpus, name, command, tmp_path)
    shown = f"fae {command} on the {name} log: exit {result.exit_code}\n{result.output[-3000:]}"
    assert result.exception is None or isinstance(result.exception, SystemExit), shown
    assert "Traceback" not in result.output, shown
    assert CANARY_TEXT not in result.output, shown
    expected = refusal(name, command)
    if expected is None:
        assert result.exit_code == 0, shown
    else:
        assert result.exit_code == 1, shown
        errors = [line for line in result.stderr.splitlines() if line.strip() and not PROGRESS.fullmatch(line)]
        assert len(errors) == 1 and errors[0].startswith("error: ") and expected in errors[0], shown
        assert sorted(out.iterdir()) == [], shown  # refused before its first file
    # nothing outside the log's own files and the command's output was written, and no file holds the canary
    outside = [p for p in changed if not (p.startswith(str(log)) or p.startswith(str(out)))]
    assert outside == [], shown
    leaked = [p for p in changed if Path(p).exists() and _holds_canary(Path(p))]
    assert leaked == [], shown


def test_the_escaping_hash_would_reach_out_of_both_body_folders(tmp_path):
    """The corpus's escaping hash is a real threat: joined as fae joins a hash, it names the file planted beside
    the logs from a log's body folder, and a file beside the export folder from the export's (so the export and
    merge cases above fail if its check goes)."""
    log = tmp_path / "logs" / "escaping-hash.duckdb"
    source = Path(f"{log}.bodies") / ESCAPING_HASH[:2] / f"{ESCAPING_HASH[2:]}.zst"
    target = tmp_path / "out" / "export" / "export" / "bodies" / ESCAPING_HASH[:2] / f"{ESCAPING_HASH[2:]}.zst"
    assert os.path.normpath(source) == str(tmp_path / "escape.zst")
    assert os.path.normpath(target) == str(tmp_path / "out" / "export" / "escape.zst")


def test_a_log_from_an_older_fae_rescores_as_the_same_log_at_this_fae_s_schema(corpus, tmp_path):
    """Migrated as ``fae rejudge`` opens it, a log taken back to schema 7 gets the verdicts its honest twin gets."""
    from fae import api

    outcomes = {}
    for name in ("honest", "older"):
        log = tmp_path / f"{name}.duckdb"
        shutil.copy(corpus[name], log)
        outcomes[name] = api.rejudge(log, workers=1).outcomes
    assert outcomes["older"] == outcomes["honest"] and sum(outcomes["honest"].values()) > 0


def test_a_run_id_fae_never_makes_is_not_replayed(corpus, tmp_path):
    """It would name the proxied URLs of the replay: refused in one line, before any server starts."""
    log = tmp_path / "path-ids.duckdb"
    shutil.copy(corpus["path-ids"], log)
    renamed = "../../builtin-create-patient/v0/gold/r0"
    result = runner.invoke(app, ["replay", renamed, "--log", str(log), "--out", str(tmp_path / "replay.duckdb")])
    assert result.exit_code == 1 and "fae never makes" in result.stderr, result.output
    assert len(result.stderr.splitlines()) == 1 and not (tmp_path / "replay.duckdb").exists(), result.output


@pytest.mark.parametrize("query", ["SELECT * FROM leak", f"SELECT content FROM read_text('{__file__}')"])
def test_sql_cannot_read_a_file_through_a_view_the_log_brings_or_directly(corpus, query, tmp_path):
    """A view of the log's own beside fae's is allowed in the file, but running it reads nothing outside."""
    log = tmp_path / "extra-view.duckdb"
    shutil.copy(corpus["extra-view"], log)
    result = runner.invoke(app, ["sql", query, "--log", str(log)])
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("error: not allowed here") and len(result.stderr.splitlines()) == 1, result.output
    assert CANARY_TEXT not in result.output and "fae-canary" not in result.output
