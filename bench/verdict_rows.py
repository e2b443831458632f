"""Rejudge a copy of a log and save its verdict rows, sorted, to compare one version of the judges with another.

A speed change to judging must not change a verdict. This copies the log (the
original is never written), runs ``fae rejudge`` on the copy with the default
plan, and writes every row of that batch as one JSON line, sorted by run,
judge and rule-set hash, with the columns a verdict is made of: run, judge,
rule set and its hash, outcome, passed and the evidence exactly as stored. The
code version, time and batch id are left out: they change with every edit
and every rejudge. It prints the rows' SHA-256; ``--against FILE`` compares
with a file saved before and names the first row that differs.

    uv run python bench/verdict_rows.py LOG OUT.jsonl [--workers 1] [--against BEFORE.jsonl]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fae.judge.rejudge import rejudge

_COLUMNS = "run_id, judge, CAST(rule_set AS VARCHAR), rule_set_hash, outcome, passed, CAST(evidence AS VARCHAR)"


def verdict_rows(log: Path, workers: int) -> list[str]:
    """The rejudged verdict rows of a copy of ``log``, one JSON line each, sorted."""
    with tempfile.TemporaryDirectory(prefix="fae-verdicts-") as folder:
        copy = Path(folder) / "log.duckdb"
        shutil.copy(log, copy)
        batch = rejudge(copy, workers=workers).batch
        con = duckdb.connect(str(copy), read_only=True)
        rows = con.execute(
            f"SELECT {_COLUMNS} FROM verdicts WHERE batch = ? ORDER BY run_id, judge, rule_set_hash", [batch]
        ).fetchall()
        con.close()
    return [json.dumps(list(row)) for row in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--against", type=Path, help="a file this script saved before: say whether the rows match")
    args = parser.parse_args()
    lines = verdict_rows(args.log, args.workers)
    text = "\n".join(lines) + "\n"
    args.out.write_text(text)
    print(f"{len(lines)} verdict rows, sha256 {hashlib.sha256(text.encode()).hexdigest()}")
    if args.against:
        before = args.against.read_text().splitlines()
        if before == lines:
            print(f"identical to {args.against}")
            return
        for index, (old, new) in enumerate(zip(before, lines, strict=False)):
            if old != new:
                raise SystemExit(f"row {index} differs:\n  before {old}\n  now    {new}")
        raise SystemExit(f"{len(before)} rows before, {len(lines)} now")


if __name__ == "__main__":
    main()
