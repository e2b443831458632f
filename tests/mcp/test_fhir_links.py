"""Moving a FHIR server's paging links onto the client's base URL."""

from __future__ import annotations

import httpx
import pytest

from fae.mcp.fhir_links import link_url, rebase_link, server_base_path


def test_link_url_finds_the_relation():
    bundle = {"link": [{"relation": "self", "url": "a"}, {"relation": "next", "url": "b"}]}
    assert (link_url(bundle, "next"), link_url(bundle, "previous"), link_url({}, "next")) == (
        "b",
        None,
        None,
    )


@pytest.mark.parametrize(
    ("link", "self_link", "expected"),
    [
        # Server behind a proxy: its own host and base path, the proxy's base on the client.
        (
            "http://fhir:8080/sandbox/r1/fhir/Patient?_page=2&_count=2",
            "http://fhir:8080/sandbox/r1/fhir/Patient?_count=2",
            "http://127.0.0.1:9000/run/r1/agent/fhir/Patient?_page=2&_count=2",
        ),
        # HAPI: the next page hangs off the base itself.
        (
            "http://hapi:8080/fhir?_getpages=abc&_getpagesoffset=20",
            "http://hapi:8080/fhir/Patient?name=x",
            "http://127.0.0.1:9000/run/r1/agent/fhir?_getpages=abc&_getpagesoffset=20",
        ),
        # No self link to learn the server's base from: the resource type marks the split.
        (
            "http://elsewhere/x/y/Patient?page=3",
            None,
            "http://127.0.0.1:9000/run/r1/agent/fhir/Patient?page=3",
        ),
        # Already on the client's base: kept as it is.
        (
            "http://127.0.0.1:9000/run/r1/agent/fhir/Patient?p=2",
            None,
            "http://127.0.0.1:9000/run/r1/agent/fhir/Patient?p=2",
        ),
        # Relative link: resolved against the request, then kept.
        ("Patient?p=4", None, "http://127.0.0.1:9000/run/r1/agent/fhir/Patient?p=4"),
    ],
)
def test_rebase_link(link, self_link, expected):
    client_base = httpx.URL("http://127.0.0.1:9000/run/r1/agent/fhir/")
    request_url = client_base.join("Patient?_count=2")
    server_base = server_base_path(self_link, request_url, "Patient")
    rebased = rebase_link(
        link,
        client_base=client_base,
        request_url=request_url,
        search_path="Patient",
        server_base_path=server_base,
    )
    assert str(rebased) == expected
