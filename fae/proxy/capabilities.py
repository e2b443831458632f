"""Which capability lets which actor of which run through the proxy, until the run is revoked.

The harness is the only minter: it asks for a run's URLs (``ProxyHandle.url``) and hands the
agent's to the agent alone. A capability names one (run, actor) pair, so an agent cannot take
the harness's actors (``setup``, ``harness``) nor another run; revoking a run when it closes
makes every URL it was given dead, which is what makes one harmless in a log read later.
"""

from __future__ import annotations

import hmac
import threading

from fae.util.credentials import new_capability

HARNESS_ACTORS = frozenset({"setup", "harness"})
"""Actors the harness plays itself: the only ones the proxy lets reach admin routes."""


class CapabilityBook:
    """The live capabilities of a recording: (run, actor) → capability, and back."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_pair: dict[tuple[str, str], str] = {}
        self._by_capability: dict[str, tuple[str, str]] = {}

    def capability(self, run_id: str, actor: str) -> str:
        """The capability of ``actor`` in ``run_id``, minted on first asking."""
        with self._lock:
            found = self._by_pair.get((run_id, actor))
            if found is None:
                found = new_capability()
                self._by_pair[(run_id, actor)] = found
                self._by_capability[found] = (run_id, actor)
            return found

    def owner(self, capability: str) -> tuple[str, str] | None:
        """The (run, actor) a live capability belongs to, or None for one never minted or revoked."""
        with self._lock:
            pair = self._by_capability.get(capability)
            # the dict lookup found it by hash; compare in constant time all the same
            if pair is None or not hmac.compare_digest(self._by_pair.get(pair, ""), capability):
                return None
            return pair

    def revoke(self, run_id: str) -> None:
        """Every capability of ``run_id`` stops working (a run id used again gets new ones)."""
        with self._lock:
            for pair in [pair for pair in self._by_pair if pair[0] == run_id]:
                del self._by_capability[self._by_pair.pop(pair)]

    def live_runs(self) -> set[str]:
        with self._lock:
            return {run_id for run_id, _ in self._by_pair}
