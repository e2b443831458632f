"""The runs in flight on one stack: each in its own cancel scope, so that a stop cancels them all.

Every executor records a run through ``RunSlots.record``: the in-process recording for each of its runs, and
each shard recorder (a local worker, a Ray actor) for the runs handed to it.
"""

from __future__ import annotations

from collections.abc import Mapping

import anyio

from fae.agents.base import Agent
from fae.harness.interrupt import StopRequest
from fae.harness.paraphrases import Paraphrases
from fae.harness.run import RunSpec, execute_run
from fae.harness.stack import Stack
from fae.harness.worklist import Worklist


class RunSlots:
    """Records the worklist's runs on ``stack``; ``stop`` ends the ones in flight (stored interrupted)."""

    def __init__(
        self,
        stack: Stack,
        work: Worklist,
        agents: Mapping[str, Agent],
        *,
        stop: StopRequest,
        paraphrases: Paraphrases | None = None,
        settle_s: float | None = None,
    ) -> None:
        self._stack, self._work, self._agents = stack, work, agents
        self.stop_request = stop
        self._paraphrases, self._settle_s = paraphrases, settle_s
        self._scopes: dict[str, anyio.CancelScope] = {}

    async def record(self, spec: RunSpec) -> str | None:
        """Record one run; its status, or None when a stop came before it started (the next --resume records it)."""
        if self.stop_request.requested:
            return None
        status = "interrupted"  # what the run is when its scope is cancelled before execute_run returns
        with anyio.CancelScope() as scope:
            self._scopes[spec.run_id] = scope
            try:
                status = await execute_run(
                    self._stack,
                    spec,
                    self._work.rendered[(spec.task_id, spec.variation)],
                    self._agents[spec.agent],
                    paraphrase=self._paraphrases,
                    stop=self.stop_request,
                    settle_s=self._settle_s,
                )
            finally:
                del self._scopes[spec.run_id]
        return "interrupted" if scope.cancelled_caught else status

    def cancel(self) -> None:
        """Cancel every run in flight (call on the stack's event loop)."""
        for scope in list(self._scopes.values()):
            scope.cancel()
