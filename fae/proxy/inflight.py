"""Which runs have requests in flight at the proxy, so the harness reads a run back only once they are recorded.

A request counts from the moment its headers are routed until its exchange
has been handed to the log (the ``InFlightAddon`` runs after the recording
addon in every hook) or it failed. The harness's and the setup actor's own
requests are not counted: they are the read-back and the seeding, not the
run's work. ``InFlightBook.drained`` is what ``fae.harness.settle`` waits
on: a write an agent left in flight when it answered is recorded, and seen,
before the state capture.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import anyio
from mitmproxy import http

from fae.proxy.addon import ROUTE_KEY
from fae.proxy.routes import Route

UNCOUNTED_ACTORS = ("harness", "setup")
_COUNTED_KEY = "fae_in_flight"


@dataclass
class InFlightBook:
    """Requests in flight per run, and the waiters for a run to have none."""

    counts: Counter[str] = field(default_factory=Counter)
    _idle: dict[str, anyio.Event] = field(default_factory=dict)

    def started(self, run_id: str) -> None:
        self.counts[run_id] += 1

    def ended(self, run_id: str) -> None:
        self.counts[run_id] -= 1
        if self.counts[run_id] <= 0:
            del self.counts[run_id]
            waiter = self._idle.pop(run_id, None)
            if waiter is not None:
                waiter.set()

    async def drained(self, run_id: str, timeout_s: float) -> bool:
        """Wait until ``run_id`` has no request in flight, at most ``timeout_s``; False if one still is."""
        with anyio.move_on_after(timeout_s):
            while self.counts.get(run_id, 0) > 0:
                waiter = self._idle.setdefault(run_id, anyio.Event())
                await waiter.wait()
        return self.counts.get(run_id, 0) == 0


class InFlightAddon:
    """Counts each routed request of a run's own actors until its exchange is recorded or it fails."""

    def __init__(self, book: InFlightBook):
        self.book = book

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        route: Route | None = flow.metadata.get(ROUTE_KEY)
        if route is None or route.actor in UNCOUNTED_ACTORS or flow.response is not None:
            return  # not routed (refused by the recording addon), or the harness's own
        flow.metadata[_COUNTED_KEY] = route.run_id
        self.book.started(route.run_id)

    def _end(self, flow: http.HTTPFlow) -> None:
        run_id = flow.metadata.pop(_COUNTED_KEY, None)
        if run_id is not None:
            self.book.ended(run_id)

    def response(self, flow: http.HTTPFlow) -> None:
        self._end(flow)

    def error(self, flow: http.HTTPFlow) -> None:
        self._end(flow)
