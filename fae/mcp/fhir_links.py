"""Paging links of FHIR search Bundles, and how to follow them from behind a proxy.

A FHIR server writes its paging links with its own address; a client that
reaches it through a proxy (another host, port and path) must move each link
onto its own base before following it. Pure functions over ``httpx.URL``.
"""

from __future__ import annotations

import httpx

from fae.fhir.types import Resource


def link_url(bundle: Resource, relation: str) -> str | None:
    """The URL of a Bundle's link with this relation (``self``, ``next``), if any."""
    for link in bundle.get("link") or []:
        if isinstance(link, dict) and link.get("relation") == relation and link.get("url"):
            return str(link["url"])
    return None


def _with_slash(path: str) -> str:
    return path if path.endswith("/") else path + "/"


def server_base_path(self_link: str | None, request_url: httpx.URL, search_path: str) -> str | None:
    """The FHIR server's own base path, read off the self link of the first page."""
    if not self_link:
        return None
    path = request_url.join(self_link).path.rstrip("/")
    for suffix in (f"/{search_path}/_search", f"/{search_path}"):
        if path.endswith(suffix):
            return path[: -len(suffix)]
    return None


def rebase_link(
    link: str,
    *,
    client_base: httpx.URL,
    request_url: httpx.URL,
    search_path: str,
    server_base_path: str | None,
) -> httpx.URL:
    """Put a paging link onto the client's base URL, keeping its path below the base and its query.

    A FHIR server writes absolute links with its own address, which the client
    may not reach (it may go through a recording proxy on another host, port and
    path). The part below the server's base comes from the first page's self
    link; failing that, from the resource type in the path; failing that the
    link is taken to sit on the base itself (HAPI's ``?_getpages=...``).
    """
    url = request_url.join(link)
    base_path = _with_slash(client_base.path)
    same_origin = (url.scheme, url.host, url.port) == (
        client_base.scheme,
        client_base.host,
        client_base.port,
    )
    if same_origin and _with_slash(url.path).startswith(base_path):
        return url
    if server_base_path is not None and (
        url.path == server_base_path or url.path.startswith(_with_slash(server_base_path))
    ):
        relative = url.path[len(server_base_path) :].lstrip("/")
    else:
        segments = url.path.split("/")
        if search_path in segments:
            at = len(segments) - 1 - segments[::-1].index(search_path)
            relative = "/".join(segments[at:])
        else:
            relative = ""
    path = base_path + relative if relative else (base_path.rstrip("/") or "/")
    return client_base.copy_with(path=path, query=url.query or None)
