"""The records a task's variation asks the agent to write: a write-verification scenario's, or a suite
write task's (one or several, ``fae.tasks.write_targets``)."""

from __future__ import annotations

from fae.tasks.scenarios import scenario_target
from fae.tasks.write_targets import WriteTarget, suite_targets


def targets_for(task_id: str, variation: int) -> list[WriteTarget]:
    """Every record the task asks for, in the order its spec names them (empty: none known)."""
    found = scenario_target(task_id, variation)
    if found is not None:
        return [found]
    return suite_targets(task_id, variation)
