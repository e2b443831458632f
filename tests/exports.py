"""An export that fails part way, for the tests of what readers make of it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fae.errors import StoreError
from fae.store.export import export_parquet, log_id


def stop_export_part_way(log: Path, directory: Path) -> Path:
    """Export ``log`` again into ``directory`` and have it fail at its second table, events, with its runs already
    rewritten, as a full disk would: a file stands where one of its events partition folders goes, so DuckDB's
    COPY cannot create it. Returns that file."""
    folder = sorted(p.parent for p in (directory / "events").glob(f"**/{log_id(log)}_*.parquet"))[-1]
    shutil.rmtree(folder)
    folder.write_text("in the way")
    with pytest.raises(StoreError, match="cannot export events"):
        export_parquet(log, directory)
    return folder
