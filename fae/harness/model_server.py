"""How many requests a model server serves at once, asked before a recording starts.

A local model server often serves one request at a time: llama.cpp's ``llama-server`` has as many
slots as its ``--parallel`` (default 1 or 4 by version, reported by ``GET /props`` as ``total_slots``),
and queues every other request. With ``--concurrency`` above that, the runs' LLM calls wait in the
queue and their waits count against the agent's LLM timeout, so runs error one after another for no
fault of the agent. fae asks once, before the first run, and warns; it never changes the plan.

A server that does not answer ``/props`` with a slot count (OpenAI, vLLM, Ollama, fae's scripted
server) is taken to serve requests in parallel: nothing is said.
"""

from __future__ import annotations

import httpx

from fae.util.tls import client_tls

PROPS_TIMEOUT_S = 3.0


def props_url(llm_url: str) -> str:
    """``GET /props`` on the server's root: ``--llm-url`` usually names its ``/v1`` API."""
    root = llm_url.rstrip("/").removesuffix("/v1")
    return f"{root}/props"


def parallel_slots(llm_url: str, *, timeout_s: float = PROPS_TIMEOUT_S) -> int | None:
    """The number of requests the server serves at once, where it says (llama.cpp's ``total_slots``)."""
    try:
        reply = httpx.get(props_url(llm_url), timeout=timeout_s, verify=client_tls())
        slots = reply.json().get("total_slots") if reply.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    return slots if isinstance(slots, int) and not isinstance(slots, bool) and slots > 0 else None


def serial_warning(llm_url: str | None, at_once: int) -> str | None:
    """One line when ``at_once`` runs at a time would send the model server more requests than it serves."""
    if not llm_url or at_once <= 1:
        return None
    slots = parallel_slots(llm_url)
    if slots is None or slots >= at_once:
        return None
    return (
        f"warning: the model server at {llm_url} serves {slots} request(s) at a time (its /props says "
        f"total_slots={slots}) and this recording runs {at_once} at once: the rest queue, and their waits count "
        f"against the LLM timeout (FAE_LLM_TIMEOUT_S). Record with --concurrency {slots}, or start the server "
        f"with more slots (llama-server --parallel {at_once})."
    )
