"""Importing this registers the built-in judges."""

from fae.judge import drift, ensure_record, failure_modes, oracle, task_checks  # noqa: F401
