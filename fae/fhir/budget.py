"""A request's time allowance: long loops call `check`, which answers 503 once it is spent.

The stopwatch is passed in (`time.monotonic` when serving, a counter in tests),
so nothing here reads a clock of its own and a test can run out of time on cue.
"""

from __future__ import annotations

from collections.abc import Callable

from fae.fhir.outcome import FhirProblem

# how many loop steps pass between two looks at the stopwatch
STRIDE = 256


class Budget:
    """The deadline one request runs under; `None` seconds means no limit."""

    __slots__ = ("seconds", "timer", "deadline", "_steps")

    def __init__(self, seconds: float | None, timer: Callable[[], float] | None = None):
        self.seconds = seconds
        self.timer = timer
        self.deadline = timer() + seconds if seconds is not None and timer is not None else None
        self._steps = 0

    def check(self) -> None:
        """Raise a 503 FhirProblem when the deadline has passed."""
        if self.deadline is not None and self.timer() > self.deadline:  # type: ignore[misc]
            raise FhirProblem(
                503,
                f"The request ran past the server's time budget of {self.seconds:g} s "
                "and was abandoned; nothing it would have written was kept",
                code="timeout",
            )

    def step(self) -> None:
        """`check`, but only every STRIDE calls: cheap enough for a per-resource loop."""
        self._steps += 1
        if self._steps >= STRIDE:
            self._steps = 0
            self.check()


UNLIMITED = Budget(None)
