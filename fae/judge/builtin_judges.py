"""Importing this registers the built-in judges."""

from fae.judge import drift_judge, ensure_record, failure_modes, oracle, task_checks  # noqa: F401
