"""A write-verification case's world around any agent: other users', a verifier's and a fault's steps.

A case task (``TASK--CASE``, fae/tasks/scenarios.py) names steps the harness plays, not the agent: at the
start (after seeding, before the agent starts), after the agent's N-th write reached the server (the proxy holds
that write's reply until the steps are done, so they land between the write and whatever the agent does next,
the same way for every agent), and after the agent answered (before the harness's read-back). The steps go through
the proxy as their actor (``other-user``, ``verifier``, ``fault``), or straight to the server (``via: direct``),
and are recorded like every exchange. The agent never gets these actors' bases.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from fae.agents.plan_runner import run_plan
from fae.agents.scripted_agent import http_caller
from fae.errors import PlanError
from fae.harness.stack import Stack
from fae.plan import Plan
from fae.proxy.faults import After, AfterWrite, Written
from fae.tasks.scenarios import case_world
from fae.util.tls import client_tls


class World:
    """The world of one run of a case task (empty for any other task)."""

    def __init__(self, stack: Stack, run_id: str, task_id: str, variation: int) -> None:
        self._stack, self._run_id = stack, run_id
        self._plans = case_world(task_id, variation)
        self.errors: list[str] = []
        """What the world could not do (a step naming a record the agent's write did not make): the run fails."""

    def after_writes(self) -> list[After]:
        """What to play after the agent's N-th write (of a method and resource type, where named), for the proxy
        to await before that write's reply goes on."""

        def then(plan: Plan) -> AfterWrite:
            async def play(record: Written) -> None:
                await self._play(plan, record)

            return play

        return [
            After(when.after, then(plan), when.method.upper() if when.method else None, when.resource)
            for when, plan in self._plans
            if isinstance(when.after, int)
        ]

    async def at(self, moment: str) -> None:
        """Play the steps of ``start`` or ``answer``."""
        for when, plan in self._plans:
            if when.after == moment:
                await self._play(plan, None)

    def _base_for(self, actor: str, via: str) -> tuple[str, Mapping[str, str]] | None:
        """Through the proxy as the step's actor, or straight to the server with the stack key (``via: direct``)."""
        if via == "direct":
            return self._stack.direct_fhir(self._run_id)
        return self._stack.fhir_base(self._run_id, actor), {}

    async def _play(self, plan: Plan, record: Written | None) -> None:
        async def no_tools(name: str, args: dict[str, Any]) -> Any:
            raise PlanError("the world takes no tool calls")

        try:
            async with httpx.AsyncClient(timeout=60, verify=client_tls()) as client:
                caller = http_caller(client, self._base_for, f"run {self._run_id}")
                await run_plan(plan, no_tools, {"record": record or {}}, call_http=caller)
        except (PlanError, httpx.HTTPError) as exc:
            self.errors.append(str(exc))
