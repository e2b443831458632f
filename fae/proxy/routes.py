"""Attribution by path: ``/run/{run_id}/{actor}/{capability}/{upstream}/{rest}``.

Any HTTP client works unchanged: it is given a base URL that already names the
run, the actor, the capability that lets that actor of that run through
(``fae.proxy.capabilities``) and the upstream, and the proxy strips the prefix
before forwarding. A capability in the path rather than a header is what lets
every client take it as a plain base URL (MCP clients, the OpenAI and Anthropic
SDKs, LangChain), and links an upstream writes lead back through the proxy with
it. The log never keeps one (``fae.util.credentials``).

Which paths an actor may reach below an upstream is decided here too
(``refusal``): the harness's own actors reach everything, every other actor
only the API of its own run.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from fae.proxy.capabilities import HARNESS_ACTORS
from fae.store.names import RUN_ID
from fae.util.credentials import is_capability

ACTORS = ("agent", "setup", "harness", "verifier", "other-user", "fault")
UPSTREAM_KINDS = ("fhir", "llm", "mcp", "http")

_RUN_ID = RUN_ID
_NAME = re.compile(r"[a-z][a-z0-9-]{0,31}")


@dataclass(frozen=True, slots=True)
class Upstream:
    """Where one named upstream lives and what kind of traffic it carries."""

    name: str
    base_url: str
    kind: str
    embedded: bool = False
    """Started by the stack: it answers only requests carrying the stack key, which the proxy adds; an
    embedded FHIR upstream keeps one sandbox per run (``sandbox_id``), the only one a run's agent reaches."""

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise ValueError(f"upstream name {self.name!r} must be lower-case letters, digits and -")
        if self.kind not in UPSTREAM_KINDS:
            raise ValueError(f"upstream kind {self.kind!r} is not one of {UPSTREAM_KINDS}")
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"upstream {self.name}: {self.base_url!r} is not an http(s) URL")

    @property
    def scheme(self) -> str:
        return urlsplit(self.base_url).scheme

    @property
    def host(self) -> str:
        return urlsplit(self.base_url).hostname or ""

    @property
    def port(self) -> int:
        parts = urlsplit(self.base_url)
        return parts.port or (443 if parts.scheme == "https" else 80)

    @property
    def base_path(self) -> str:
        return urlsplit(self.base_url).path.rstrip("/")


@dataclass(frozen=True, slots=True)
class Route:
    run_id: str
    actor: str
    upstream: Upstream
    rest: str  # path below the upstream's base, starting with "/", query included
    capability: str = ""


class RouteError(ValueError):
    """A request path that does not name a run, an actor and a known upstream."""


def parse_route(path: str, upstreams: dict[str, Upstream]) -> Route:
    """Split a proxied path into its run, actor, capability, upstream and the rest (checked by the caller)."""
    raw_path, sep, query = path.partition("?")
    parts = raw_path.split("/", 6)
    if len(parts) < 6 or parts[0] != "" or parts[1] != "run":
        raise RouteError("path must start with /run/{run_id}/{actor}/{capability}/{upstream}/")
    _, _, run_id, actor, capability, upstream_name, *rest = parts
    if not _RUN_ID.fullmatch(run_id):
        raise RouteError(f"run id {run_id!r} is not valid")
    if actor not in ACTORS:
        raise RouteError(f"actor {actor!r} is not one of {', '.join(ACTORS)}")
    if not is_capability(capability):
        raise RouteError("path must start with /run/{run_id}/{actor}/{capability}/{upstream}/: no capability")
    upstream = upstreams.get(upstream_name)
    if upstream is None:
        known = ", ".join(sorted(upstreams)) or "none"
        raise RouteError(f"no upstream named {upstream_name!r} (known: {known})")
    tail = "/" + (rest[0] if rest else "")
    if ".." in tail.split("/"):
        raise RouteError("path may not contain '..'")
    return Route(
        run_id=run_id,
        actor=actor,
        upstream=upstream,
        rest=tail + (sep + query if sep else ""),
        capability=capability,
    )


def sandbox_id(run_id: str) -> str:
    """The embedded server's sandbox for a run: short, FHIR-id safe, derived from the run id."""
    return "sb-" + hashlib.sha256(run_id.encode()).hexdigest()[:20]


_MCP_PATHS = ("/mcp", "/sse", "/messages/")


def _below(path: str, base: str) -> bool:
    return path == base or path.startswith(base.rstrip("/") + "/")


_LLM_ADMIN = ("/_fae", "/slots")
"""Paths of a model server that change it for every run (fae's plan registry; llama.cpp's slot save,
restore and erase): an agent reaches any other path, so an API fae does not parse (``/v1beta/...``,
``/api/chat``) still goes through and is recorded byte for byte."""


def _llm_path(route: Route, path: str) -> str:
    """The path on the model server itself: the upstream's base path (``/v1`` when ``--llm-url`` names
    the API rather than the server's root) joined to the path the agent asked for."""
    return route.upstream.base_path.rstrip("/") + "/" + path.lstrip("/")


def refusal(route: Route) -> str | None:
    """Why ``route``'s actor may not reach its path, or None when it may.

    The harness's actors (setup, harness) reach every path. Every other actor reaches only
    its run's own API: on an embedded FHIR server its run's sandbox (not the sandbox list,
    nor creating, resetting, cloning or dropping one, nor another run's); on an LLM upstream
    every path but the server's admin routes (``_LLM_ADMIN``); on an MCP upstream its
    transports. A path is judged percent-decoded, and ``.`` or ``..`` segments are refused.
    """
    if route.actor in HARNESS_ACTORS:
        return None
    path = unquote(route.rest.partition("?")[0])
    if any(segment in (".", "..") for segment in path.split("/")) or "\\" in path:
        return "a path with '.' or '..' segments"
    kind = route.upstream.kind
    if kind == "fhir" and route.upstream.embedded:
        base = f"/sandbox/{sandbox_id(route.run_id)}/fhir"
        if not _below(route.rest.partition("?")[0], base):
            return f"only the run's own FHIR base ({base}) on the embedded server"
    elif kind == "llm" and any(_below(_llm_path(route, path), admin) for admin in _LLM_ADMIN):
        return "not the model server's admin routes (fae's plan registry, llama.cpp's slots)"
    elif kind == "mcp" and not any(_below(path, allowed.rstrip("/")) for allowed in _MCP_PATHS):
        return "only the MCP transports (/mcp, /sse, /messages/)"
    return None


def route_url(proxy_base: str, run_id: str, actor: str, capability: str, upstream: str, rest: str = "") -> str:
    """The URL a client uses to reach ``upstream`` as ``actor`` in ``run_id``, with that pair's capability."""
    return f"{proxy_base.rstrip('/')}/run/{run_id}/{actor}/{capability}/{upstream}/{rest.lstrip('/')}"


CAPABILITY_HEADER = "x-fae-capability"
"""The run's capability, told to the stack's own upstreams so they can call back through the proxy as the run."""
PROXY_HOST = re.compile(r"(127\.0\.0\.1|localhost|\[::1\]):\d{1,5}")
"""The proxy's own address as it tells the stack's upstreams (X-Forwarded-Host): always on the loopback."""


def proxied_route(headers: Mapping[str, str], upstream: str, rest: str = "") -> str | None:
    """The URL a stack upstream uses to call ``upstream`` back through the proxy as the run and actor of the request
    it is serving, from the headers the proxy set on it (X-Fae-Run, X-Fae-Actor, the capability, X-Forwarded-Host);
    None when the request did not come through the proxy. Only the proxy reaches a stack's upstreams (the stack
    key), and it sets these headers itself, so they can be believed."""
    lowered = {k.lower(): v for k, v in headers.items()}
    run_id, host, capability = (
        lowered.get("x-fae-run"),
        lowered.get("x-forwarded-host", ""),
        lowered.get(CAPABILITY_HEADER, ""),
    )
    if not run_id or not PROXY_HOST.fullmatch(host) or not is_capability(capability):
        return None
    return route_url(f"http://{host}", run_id, lowered.get("x-fae-actor", "agent"), capability, upstream, rest)
