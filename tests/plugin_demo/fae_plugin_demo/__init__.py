"""A tiny fae plugin: a task family (by directory), an agent prefix and a judge, found by entry points."""

from pathlib import Path

TASKS_DIR = str(Path(__file__).parent / "tasks")
