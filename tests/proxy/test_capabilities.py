"""Each run's URLs carry a capability of their (run, actor): the proxy lets nothing else through, records the
refusals it can attribute, and the log never holds a capability or the stack key that works."""

from __future__ import annotations

import json
import re

import httpx
import pytest

from fae.proxy.capabilities import CapabilityBook
from fae.proxy.routes import Route, RouteError, Upstream, parse_route, refusal, route_url, sandbox_id
from fae.proxy.server import run_proxy
from fae.recorder.recorder import Recorder
from fae.store.log import EventLog
from fae.store.writer import open_writer
from fae.util.credentials import CAPABILITY, KEY_HEADER, new_stack_key, require_stack_key
from fae.util.serve import serve_asgi
from tests.upstream import create_upstream

CAP = "fae-cap-" + "0123456789abcdef" * 2
UPSTREAMS = {
    "api": Upstream("api", "http://127.0.0.1:1", "http"),
    "llm": Upstream("llm", "http://127.0.0.1:1", "llm"),
    "llm-v1": Upstream("llm-v1", "http://127.0.0.1:1/v1", "llm"),
    "mcp": Upstream("mcp", "http://127.0.0.1:1", "mcp"),
    "fhir": Upstream("fhir", "http://127.0.0.1:1", "fhir", embedded=True),
    "ext": Upstream("ext", "http://127.0.0.1:1/fhir", "fhir"),
}


def test_a_route_names_run_actor_capability_and_upstream():
    url = route_url("http://p:1", "r1", "agent", CAP, "mcp", "mcp")
    assert url == f"http://p:1/run/r1/agent/{CAP}/mcp/mcp"
    route = parse_route(url.removeprefix("http://p:1") + "?a=1", UPSTREAMS)
    assert (route.run_id, route.actor, route.capability, route.upstream.name, route.rest) == (
        "r1",
        "agent",
        CAP,
        "mcp",
        "/mcp?a=1",
    )
    # the shape of logs recorded before capabilities is no route now
    for old in ("/run/r1/agent/mcp/mcp", "/run/r1/agent/api", "/run/r1/robot/x/api/"):
        with pytest.raises(RouteError):
            parse_route(old, UPSTREAMS)


def _route(actor: str, upstream: str, rest: str, run_id: str = "r1") -> Route:
    return Route(run_id=run_id, actor=actor, upstream=UPSTREAMS[upstream], rest=rest, capability=CAP)


OWN = f"/sandbox/{sandbox_id('r1')}/fhir"


@pytest.mark.parametrize(
    ("actor", "upstream", "rest"),
    [
        ("agent", "fhir", OWN),
        ("agent", "fhir", f"{OWN}/Patient/1"),
        ("agent", "fhir", f"{OWN}?_count=5"),
        ("other-user", "fhir", f"{OWN}/Patient"),
        ("agent", "llm", "/v1/chat/completions"),
        ("agent", "llm-v1", "/chat/completions"),
        ("agent", "llm", "/v1beta/models/g:generateContent"),  # an API fae does not parse: recorded as it is
        ("agent", "llm", "/api/chat"),
        ("agent", "mcp", "/mcp"),
        ("agent", "mcp", "/sse"),
        ("agent", "mcp", "/messages/?session_id=ab"),
        ("agent", "ext", "/Patient/1"),
        ("agent", "api", "/anything/at/all"),
        ("setup", "fhir", "/sandbox"),
        ("harness", "fhir", f"/sandbox/{sandbox_id('r2')}"),
        ("setup", "llm", "/_fae/plans"),
    ],
)
def test_what_an_actor_may_reach(actor, upstream, rest):
    assert refusal(_route(actor, upstream, rest)) is None


@pytest.mark.parametrize(
    ("actor", "upstream", "rest"),
    [
        ("agent", "fhir", "/sandbox"),  # the sandbox list
        ("agent", "fhir", "/sandbox?id=mine"),  # creating one
        ("agent", "fhir", f"/sandbox/{sandbox_id('r1')}"),  # dropping its own
        ("agent", "fhir", f"/sandbox/{sandbox_id('r1')}/$reset"),
        ("agent", "fhir", f"/sandbox/{sandbox_id('r2')}/fhir/Patient/1"),  # another run's
        ("verifier", "fhir", f"/sandbox/{sandbox_id('r2')}/fhir/Patient/1"),
        ("agent", "fhir", "/fhir/Patient"),  # the default sandbox, shared by nobody's run
        ("agent", "fhir", f"{OWN}x/Patient"),
        ("agent", "fhir", f"{OWN}/%2e%2e/%2e%2e/{sandbox_id('r2')}/fhir/Patient"),
        ("agent", "fhir", f"{OWN}%2F..%2F..%2F{sandbox_id('r2')}%2Ffhir"),
        ("agent", "fhir", f"{OWN}/Patient/."),
        ("agent", "llm", "/_fae/plans"),
        ("agent", "llm", "/slots/0?action=erase"),
        ("agent", "llm", "/%5Ffae/plans"),
        ("agent", "llm-v1", "/../_fae/plans"),
        ("agent", "mcp", "/admin"),
        ("agent", "api", "/x/%2e%2e/y"),
    ],
)
def test_what_an_actor_may_not_reach(actor, upstream, rest):
    assert refusal(_route(actor, upstream, rest))


def test_a_capability_names_one_run_and_actor_until_the_run_is_revoked():
    book = CapabilityBook()
    agent, setup, other = book.capability("r1", "agent"), book.capability("r1", "setup"), book.capability("r2", "agent")
    assert len({agent, setup, other}) == 3 and all(CAPABILITY.fullmatch(c) for c in (agent, setup, other))
    assert book.capability("r1", "agent") == agent
    assert (book.owner(agent), book.owner(other), book.owner(CAP)) == (("r1", "agent"), ("r2", "agent"), None)
    book.revoke("r1")
    assert book.owner(agent) is None and book.owner(setup) is None and book.owner(other) == ("r2", "agent")
    assert book.capability("r1", "agent") != agent  # a run id used again starts afresh
    assert book.live_runs() == {"r1", "r2"}


@pytest.mark.anyio
async def test_the_proxy_lets_through_only_a_live_capability_on_its_own_paths(tmp_path):
    path = tmp_path / "caps.duckdb"
    key = new_stack_key()
    log = EventLog(path)
    seen: dict[str, httpx.Response] = {}
    async with (
        serve_asgi(create_upstream()) as plain,
        serve_asgi(require_stack_key(create_upstream(), key)) as keyed,
    ):
        upstreams = {
            "api": Upstream("api", f"http://127.0.0.1:{plain}", "http"),
            "fhir": Upstream("fhir", f"http://127.0.0.1:{keyed}", "fhir", embedded=True),
            "llm": Upstream("llm", f"http://127.0.0.1:{keyed}", "llm", embedded=True),
        }
        async with open_writer(log) as writer, run_proxy(upstreams, Recorder(writer), stack_key=key) as proxy:
            own = f"sandbox/{sandbox_id('r1')}/fhir/Patient/1"
            r1 = proxy.url("r1", "agent", "fhir", own)
            r1_cap = proxy.capabilities.capability("r1", "agent")
            r2_cap = proxy.capabilities.capability("r2", "agent")
            async with httpx.AsyncClient(timeout=30) as client:
                seen["own"] = await client.get(r1, headers={"x-fae-run": "r2", "x-fae-identity": "harness"})
                seen["plain"] = await client.get(proxy.url("r1", "agent", "api", "x"))
                # r2's run named with r1's capability: refused, and r1's to answer for
                seen["other run"] = await client.get(r1.replace("/run/r1/", "/run/r2/"))
                seen["as setup"] = await client.get(r1.replace("/agent/", "/setup/"))
                seen["sandbox list"] = await client.get(proxy.url("r1", "agent", "fhir", "sandbox"))
                seen["plan registry"] = await client.post(proxy.url("r1", "agent", "llm", "_fae/plans"), json={})
                seen["chat"] = await client.post(proxy.url("r1", "agent", "llm", "v1/chat/completions"), json={})
                seen["guessed"] = await client.get(r1.replace(r1_cap, CAP).replace("/run/r1/", "/run/r2/"))
                seen["setup lists"] = await client.get(proxy.url("r1", "setup", "fhir", "sandbox"))
                seen["direct"] = await client.get(f"http://127.0.0.1:{keyed}/{own}")
                proxy.revoke("r1")
                seen["revoked"] = await client.get(r1)
                seen["r2 lives"] = await client.get(proxy.url("r2", "agent", "api", "y"))
            refused_unrecorded = proxy.refused
    log.close()

    statuses = {name: reply.status_code for name, reply in seen.items()}
    assert statuses == {
        "own": 200,
        "plain": 200,
        "other run": 403,
        "as setup": 403,
        "sandbox list": 403,
        "plan registry": 403,
        "chat": 200,
        "guessed": 403,
        "setup lists": 200,
        "direct": 403,
        "revoked": 403,
        "r2 lives": 200,
    }, {name: reply.text[:200] for name, reply in seen.items()}
    assert refused_unrecorded == 2  # the guessed capability and the revoked one belong to no live run
    echoed = seen["own"].json()["headers"]
    # the proxy alone speaks for the run and the actor; the key was taken off before the app saw it
    assert echoed["x-fae-run"] == "r1" and echoed["x-fae-actor"] == "agent" and "x-fae-identity" not in echoed
    assert KEY_HEADER not in echoed and echoed["x-fae-capability"] == r1_cap
    assert "x-fae-capability" not in seen["plain"].json()["headers"]  # only the stack's own upstreams learn it

    with EventLog(path, read_only=True) as opened:
        _, rows = opened.query(
            "SELECT run_id, actor, payload FROM events WHERE kind = 'HttpExchanged' ORDER BY run_id, seq"
        )
        _, blobs = opened.query("SELECT data FROM blobs")
    exchanges = [(run_id, actor, json.loads(payload)) for run_id, actor, payload in rows]
    refused = [(run_id, actor, x["status"], x["path"]) for run_id, actor, x in exchanges if x["error"]]
    placeholder = "fae-cap-" + "redacted" * 4
    assert refused == [
        ("r1", "agent", 403, f"/run/r2/agent/{placeholder}/fhir/{own}"),
        ("r1", "agent", 403, f"/run/r1/setup/{placeholder}/fhir/{own}"),
        ("r1", "agent", 403, f"/run/r1/agent/{placeholder}/fhir/sandbox"),
        ("r1", "agent", 403, f"/run/r1/agent/{placeholder}/llm/_fae/plans"),
    ], refused
    assert all("refused by the proxy with 403" in x["error"] for _, _, x in exchanges if x["error"])
    assert [x["path"] for run_id, _, x in exchanges if run_id == "r2"] == ["/y"]  # nothing of r1's attempts

    stored_names = {name.lower() for _, _, x in exchanges for name, _ in x["request_headers"]}
    assert not stored_names & {KEY_HEADER, "x-fae-capability", "x-forwarded-prefix"}, stored_names

    everything = path.read_bytes() + b"".join(bytes(b) for (b,) in blobs) + "".join(p for *_, p in rows).encode()
    for credential in (key, r1_cap, r2_cap):
        assert credential.encode() not in everything
    assert placeholder.encode() in everything  # the echoed prefix and capability header were there, scrubbed
    assert not re.search(rb"fae-(cap|key)-[0-9a-f]{32}", everything)
