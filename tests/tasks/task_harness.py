"""The in-process player for task tests (the library's, in fae.harness.task_play) and the variations tests cover."""

from __future__ import annotations

from fae.harness.task_play import play, written_by

UNAVAILABLE = ""
"""Why the embedded server cannot be used (it always can now: kept for the fixtures that ask)."""

VARIATIONS = (0, 1, 2)
"""The variations every per-task mutation test covers."""

SWEEP = range(40)
"""The variations the gold sweep covers."""

__all__ = ["SWEEP", "UNAVAILABLE", "VARIATIONS", "play", "written_by"]
