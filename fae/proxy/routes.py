"""Attribution by path: ``/run/{run_id}/{actor}/{upstream}/{rest}``.

Any HTTP client works unchanged: it is given a base URL that already names the
run, the actor and the upstream, and the proxy strips the prefix before
forwarding.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from fae.store.names import RUN_ID

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


class RouteError(ValueError):
    """A request path that does not name a run, an actor and a known upstream."""


def parse_route(path: str, upstreams: dict[str, Upstream]) -> Route:
    """Split a proxied path into its run, actor, upstream and the rest."""
    raw_path, sep, query = path.partition("?")
    parts = raw_path.split("/", 5)
    if len(parts) < 5 or parts[0] != "" or parts[1] != "run":
        raise RouteError("path must start with /run/{run_id}/{actor}/{upstream}/")
    _, _, run_id, actor, upstream_name, *rest = parts
    if not _RUN_ID.fullmatch(run_id):
        raise RouteError(f"run id {run_id!r} is not valid")
    if actor not in ACTORS:
        raise RouteError(f"actor {actor!r} is not one of {', '.join(ACTORS)}")
    upstream = upstreams.get(upstream_name)
    if upstream is None:
        known = ", ".join(sorted(upstreams)) or "none"
        raise RouteError(f"no upstream named {upstream_name!r} (known: {known})")
    tail = "/" + (rest[0] if rest else "")
    if ".." in tail.split("/"):
        raise RouteError("path may not contain '..'")
    return Route(run_id=run_id, actor=actor, upstream=upstream, rest=tail + (sep + query if sep else ""))


def route_url(proxy_base: str, run_id: str, actor: str, upstream: str, rest: str = "") -> str:
    """The URL a client uses to reach ``upstream`` as ``actor`` in ``run_id``."""
    return f"{proxy_base.rstrip('/')}/run/{run_id}/{actor}/{upstream}/{rest.lstrip('/')}"
