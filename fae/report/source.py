"""Open a log for a study: task metadata materialised first when the file can be written, else read live."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fae.errors import StoreError
from fae.harness.task_meta import materialise_task_meta
from fae.report.scope import Queryable
from fae.store.live import LogReader
from fae.store.log import EventLog


@contextmanager
def study_log(path: str | Path) -> Iterator[Queryable]:
    """The log at ``path``; while another process records into it, its live reader (metadata as it is)."""
    path = Path(path)
    if not path.exists():
        raise StoreError(f"no log at {path}")
    try:
        log = EventLog(path)
    except StoreError as exc:
        if "open in another process" not in str(exc):
            raise
        with LogReader(path) as reader:
            yield reader
        return
    with log:
        materialise_task_meta(log)
        yield log
