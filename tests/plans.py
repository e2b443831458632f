"""Plan agents the tests share: a run that stays in flight long enough to be stopped or killed on purpose."""

from __future__ import annotations

from pathlib import Path


def slow_agent(tmp_path: Path, seconds: int = 300) -> str:
    """A plan agent whose runs wait ``seconds``: one seen running is surely still in flight a moment later.
    (Stopping or killing at the Nth run back raced: a run of the built-in task takes ~0.2 s, and on a loaded
    machine every run in flight could end before the stop reached its worker.)"""
    plan = tmp_path / f"slow-{seconds}.yaml"
    waits = "".join(f"  - wait: {min(60, seconds - start)}\n" for start in range(0, seconds, 60))  # 60 s a step
    plan.write_text(f"steps:\n{waits}  - answer: done\n")
    return f"plan:{plan}"
