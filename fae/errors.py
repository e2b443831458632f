"""The errors fae raises for things a user can get wrong.

    FaeError                 a user-facing failure: the CLI prints it in one line, exits 1
     ├── StoreError          the event log cannot be opened, read, migrated or written
     │    ├── SchemaTooNew   the log was written by a newer fae
     │    └── LogInUse       another process holds the log open for writing
     ├── RecordError         a run could not be recorded (proxy, upstream, writer)
     ├── PlanError           a scripted agent's plan file is malformed or cannot resolve
     ├── TaskError           a task file is malformed or a variation cannot be rendered
     ├── FhirError           the embedded FHIR server was given something it cannot serve
     ├── ReplayDrift         a replay or fold diverged from the recorded run
     ├── JudgeError          a judge or rule set is unknown or misconfigured
     ├── ExportError         an export's target cannot be written or refuses it (a file, an OTLP endpoint)
     └── FileRefused         a YAML or JSON file is larger, deeper or more aliased than fae parses

Programmer mistakes stay ValueError / TypeError.
"""

from __future__ import annotations


class FaeError(Exception):
    """A failure the user can act on; carries the run id and event seq where known."""

    def __init__(self, message: str, *, run_id: str | None = None, seq: int | None = None):
        super().__init__(message)
        self.run_id = run_id
        self.seq = seq

    def __reduce__(self) -> tuple:
        """Pickled with its run id and seq, so an error raised in a worker process reads the same in the parent."""
        return (_rebuild, (type(self), self.args, self.run_id, self.seq))

    def __str__(self) -> str:
        where = []
        if self.run_id is not None:
            where.append(f"run {self.run_id}")
        if self.seq is not None:
            where.append(f"event {self.seq}")
        base = super().__str__()
        return f"{base} ({', '.join(where)})" if where else base


def _rebuild(kind: type[FaeError], args: tuple, run_id: str | None, seq: int | None) -> FaeError:
    error = kind.__new__(kind)
    Exception.__init__(error, *args)
    error.run_id, error.seq = run_id, seq
    return error


class StoreError(FaeError):
    """The event log cannot be opened, read, migrated or written."""


class SchemaTooNew(StoreError):
    """The log's schema version is newer than this code understands."""


class LogInUse(StoreError):
    """Another process holds the log (or its WAL) open for writing."""


class RecordError(FaeError):
    """A run could not be recorded."""


class PlanError(FaeError):
    """A scripted agent's plan is malformed or one of its references cannot be resolved."""


class TaskError(FaeError):
    """A task definition is malformed or cannot be rendered."""


class FhirError(FaeError):
    """The embedded FHIR server cannot serve what it was asked."""


class ReplayDrift(FaeError):
    """A replay or a fold diverged from what was recorded."""


class JudgeError(FaeError):
    """A judge or a rule set is unknown or misconfigured."""


class ExportError(FaeError):
    """An export's target cannot be written, or refused what was sent (a file, an OTLP endpoint)."""


class TaskChanged(FaeError):
    """A run played a variation that fae now renders differently: judging it would score it on another task."""


class FileRefused(FaeError):
    """A YAML or JSON file fae was given is over its parsing limits (size, nesting, aliases): not parsed."""


def first_line(exc: BaseException | str) -> str:
    """An error's message cut to its first line (its type's name when it has none), for a one-line error."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
