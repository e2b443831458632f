"""The task suite: tasks as data, rendered into variations, judged by strict and light validators."""

from fae.tasks.checks import Check
from fae.tasks.model import Meta, Rendered, Task
from fae.tasks.state import MemorySnapshot, MemoryState, Snapshot, StateView, final_state
from fae.tasks.suite import Suite, load_suite

__all__ = [
    "Check",
    "MemorySnapshot",
    "MemoryState",
    "Meta",
    "Rendered",
    "Snapshot",
    "StateView",
    "Suite",
    "Task",
    "final_state",
    "load_suite",
]
