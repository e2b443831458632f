"""Runs mitmproxy in process, in reverse mode, with the recording addon."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
from mitmproxy import addons as mitm_addons
from mitmproxy import options
from mitmproxy.master import Master

from fae.errors import RecordError
from fae.proxy.addon import DEFAULT_MAX_BODY_BYTES, ExchangeSink, RecordingAddon
from fae.proxy.capabilities import CapabilityBook
from fae.proxy.faults import FaultAddon, FaultBook
from fae.proxy.inflight import InFlightAddon, InFlightBook
from fae.proxy.routes import Upstream, route_url
from fae.util.serve import PROXY_IDLE_S

# mitmproxy addons fae has no use for, left out so nothing rewrites or replays traffic.
_UNUSED = {
    "Browser",
    "ClientPlayback",
    "ServerPlayback",
    "MapLocal",
    "MapRemote",
    "ModifyBody",
    "ModifyHeaders",
    "StickyAuth",
    "StickyCookie",
    "AntiCache",
    "AntiComp",
    "Save",
    "SaveHar",
    "Onboarding",
    "CommandHistory",
    "ScriptLoader",
    "Export",
    "Cut",
    "Comment",
}


@dataclass(frozen=True, slots=True)
class ProxyHandle:
    host: str
    port: int
    upstreams: dict[str, Upstream]
    faults: FaultBook = field(default_factory=FaultBook)
    """Faults armed per run for write-verification scenarios (``fae.proxy.faults``)."""
    in_flight: InFlightBook = field(default_factory=InFlightBook)
    """Each run's requests not yet recorded (``fae.proxy.inflight``), which the settle wait waits on."""
    capabilities: CapabilityBook = field(default_factory=CapabilityBook)
    """The live capabilities (``fae.proxy.capabilities``): ``url`` mints them, ``revoke`` ends a run's."""
    addon: RecordingAddon | None = field(default=None, repr=False)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def url(self, run_id: str, actor: str, upstream: str, rest: str = "") -> str:
        """The URL ``actor`` of ``run_id`` reaches ``upstream`` by: the one place a capability is put in a URL."""
        return route_url(self.base_url, run_id, actor, self.capabilities.capability(run_id, actor), upstream, rest)

    def revoke(self, run_id: str) -> None:
        """Every URL ``run_id`` was given stops working (its run has closed)."""
        self.capabilities.revoke(run_id)

    @property
    def refused(self) -> int:
        """Requests refused with no live capability (they belong to no run, so no run's log holds them)."""
        return self.addon.refused if self.addon is not None else 0


class _Started:
    def __init__(self) -> None:
        self.event = asyncio.Event()

    def running(self) -> None:
        self.event.set()


@asynccontextmanager
async def run_proxy(
    upstreams: dict[str, Upstream],
    sink: ExchangeSink,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    stack_key: str | None = None,
) -> AsyncIterator[ProxyHandle]:
    """Serve the recording proxy until the block exits; bodies over ``max_body_bytes`` are refused (413).

    ``stack_key`` goes, in ``fae.util.credentials.KEY_HEADER``, with every request forwarded to an
    ``embedded`` upstream (the stack's own), and with no other.
    """
    if max_body_bytes < 1:
        raise RecordError(f"the body size limit must be positive (got {max_body_bytes} bytes)")
    opts = options.Options()
    master = Master(opts, with_termlog=False)
    master.addons.add(*[a for a in mitm_addons.default_addons() if type(a).__name__ not in _UNUSED])
    started = _Started()
    book = FaultBook()
    in_flight = InFlightBook()
    capabilities = CapabilityBook()
    recording = RecordingAddon(
        upstreams, sink, max_body_bytes=max_body_bytes, capabilities=capabilities, stack_key=stack_key
    )
    master.addons.add(
        recording,
        FaultAddon(book),
        InFlightAddon(in_flight),
        started,
    )
    opts.update(
        mode=[f"reverse:http://127.0.0.1:9@{host}:{port}"],
        connection_strategy="lazy",
        http2=False,
        keep_host_header=True,  # the addon sets Host itself and needs the client's for X-Forwarded-Host
        # mitmproxy reuses a client connection's upstream connections until this idle timeout;
        # embedded upstreams keep theirs open longer (fae.util.serve.KEEP_ALIVE_S), so the proxy
        # never reuses a connection the server is closing at the same moment
        tcp_timeout=PROXY_IDLE_S,
        # mitmproxy checks a body against this from its Content-Length, or as chunks arrive, before
        # buffering more of it: the client gets 413 (a response over it: 502) and the addon's error hook
        body_size_limit=str(max_body_bytes),
    )
    async with anyio.create_task_group() as group:
        group.start_soon(master.run)
        with anyio.fail_after(30):
            while not started.event.is_set() and not master.should_exit.is_set():
                await asyncio.sleep(0.005)
        server = master.addons.get("proxyserver")
        addresses = server.listen_addrs() if server else []
        if not addresses:
            master.shutdown()
            raise RecordError(f"the recording proxy could not listen on {host}:{port}")
        try:
            yield ProxyHandle(
                host=host,
                port=addresses[0][1],
                upstreams=upstreams,
                faults=book,
                in_flight=in_flight,
                capabilities=capabilities,
                addon=recording,
            )
        finally:
            master.shutdown()
