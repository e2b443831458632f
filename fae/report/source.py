"""Open a log for a study: task metadata materialised first when the file can be written, else read live."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fae.errors import StoreError
from fae.report.scope import Queryable
from fae.store.log import EventLog
from fae.store.task_meta import missing_task_variations


@contextmanager
def study_log(path: str | Path) -> Iterator[Queryable]:
    """The log at ``path``; while another process records into it, its live reader (metadata as it is).

    A log this process may not write (or whose schema is older) is opened read-only, as it is. The task
    suite and the live reader load only when needed: a study of a log that has its metadata skips their
    imports (seconds of CPU on a loaded machine).
    """
    path = Path(path)
    if not path.exists():
        raise StoreError(f"no log at {path}")
    try:
        log = EventLog(path)
    except StoreError as exc:
        if "open in another process" in str(exc):
            from fae.store.live import LogReader

            with LogReader(path) as reader:
                yield reader
            return
        log = EventLog(path, read_only=True)  # a file we may not write: studied as it is
    with log:
        missing = [] if log.read_only else missing_task_variations(log)
        if missing:
            from fae.harness.task_meta import materialise_task_meta

            materialise_task_meta(log, missing)
        yield log
