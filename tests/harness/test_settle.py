"""The settle wait before a run's read-back, on the real stack: a run's requests are recorded before it is read
back (a write the agent left in flight is not lost), a single write of the agent's is read back at once on the
embedded server, and a write that lands during the wait starts it again."""

from __future__ import annotations

import json
import time

import anyio
import httpx
import pytest

from fae.harness.config import StackConfig
from fae.harness.settle import _writes, needs_window, settle
from fae.harness.stack import Stack, open_stack, sandbox_id

PATIENT = {"resourceType": "Patient", "name": [{"family": "Late", "given": ["Ada"]}]}


def test_only_a_single_write_of_the_agents_to_one_resource_skips_the_window():
    agent_create = (1.0, "agent", "create")
    assert not needs_window([], embedded=True)
    assert not needs_window([agent_create], embedded=True)
    assert needs_window([agent_create], embedded=False)  # an external server may index it later
    assert needs_window([agent_create, (2.0, "agent", "update")], embedded=True)
    assert needs_window([(1.0, "other-user", "update")], embedded=True)  # another actor's write is a correction
    assert needs_window([(1.0, "agent", "transaction")], embedded=True)  # one exchange, many writes
    assert needs_window([(None, "agent", "create")], embedded=True)


async def _seeded(stack: Stack, client: httpx.AsyncClient, run_id: str) -> str:
    bundle = {"resourceType": "Bundle", "type": "transaction", "entry": []}
    reply = await client.post(
        stack.fhir_root(run_id, "setup") + f"sandbox?id={sandbox_id(run_id)}",
        content=json.dumps(bundle).encode(),
        headers={"content-type": "application/json"},
    )
    assert reply.status_code < 300, reply.text
    return stack.fhir_base(run_id, "agent").rstrip("/")


async def _write(client: httpx.AsyncClient, method: str, url: str, body: dict) -> dict:
    reply = await client.request(
        method, url, content=json.dumps(body).encode(), headers={"content-type": "application/fhir+json"}
    )
    assert reply.status_code < 300, reply.text
    return reply.json()


@pytest.mark.anyio
async def test_a_single_agent_write_is_read_back_without_the_window(tmp_path):
    """With the feature removed the harness sleeps settle_s (here 30 s) after it, for a wait no judge reads."""
    async with (
        open_stack(tmp_path / "runs.duckdb", StackConfig(processes=1)) as stack,
        httpx.AsyncClient(timeout=60) as client,
    ):
        base = await _seeded(stack, client, "one-write")
        await _write(client, "POST", f"{base}/Patient", PATIENT)
        with anyio.fail_after(20):
            assert await settle(stack, "one-write", 30.0) == 0.0
        assert [w[1:] for w in _writes(stack, "one-write")] == [("agent", "create")]


@pytest.mark.anyio
async def test_a_write_left_in_flight_when_the_agent_answered_is_recorded_before_the_read_back(tmp_path):
    """The sneaky agent sends a write's headers and half its body, answers, and sends the rest later: the wait
    holds the read-back until the write is recorded. Without the proxy's in-flight count the harness found no
    write in the log, read back at once, and the capture missed the record."""
    async with (
        open_stack(tmp_path / "runs.duckdb", StackConfig(processes=1)) as stack,
        httpx.AsyncClient(timeout=60) as client,
    ):
        base = await _seeded(stack, client, "late-write")
        url = httpx.URL(f"{base}/Patient")
        body = json.dumps(PATIENT).encode()
        head = (
            f"POST {url.raw_path.decode()} HTTP/1.1\r\nHost: {url.host}:{url.port}\r\n"
            f"Content-Type: application/fhir+json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        stream = await anyio.connect_tcp(url.host, url.port)
        await stream.send(head.encode() + body[:10])
        with anyio.fail_after(30):
            while not stack.proxy.in_flight.counts.get("late-write"):  # the proxy has read its headers
                await anyio.sleep(0.01)

        async def finish_late() -> None:
            await anyio.sleep(0.5)
            await stream.send(body[10:])
            await stream.receive()

        async with anyio.create_task_group() as group:
            group.start_soon(finish_late)
            with anyio.fail_after(30):
                await settle(stack, "late-write", 5.0)
            writes = _writes(stack, "late-write")
        await stream.aclose()
        assert [w[1:] for w in writes] == [("agent", "create")], "the late write was not recorded before the read-back"


@pytest.mark.anyio
async def test_a_write_landing_during_the_wait_starts_it_again(tmp_path):
    """A correction (create, update), then another update 0.5 s into a 3 s wait: the read-back comes settle_s
    after that last one. Without the second round it came 2.5 s after it, and the judge would find the
    read-back too early for a correction that was in fact fine."""
    async with (
        open_stack(tmp_path / "runs.duckdb", StackConfig(processes=1)) as stack,
        httpx.AsyncClient(timeout=60) as client,
    ):
        base = await _seeded(stack, client, "corrected")
        created = await _write(client, "POST", f"{base}/Patient", PATIENT)
        record = f"{base}/Patient/{created['id']}"
        await _write(client, "PUT", record, created | {"gender": "female"})

        async def late_update() -> None:
            await anyio.sleep(0.5)
            await _write(client, "PUT", record, created | {"gender": "female", "birthDate": "1970-01-01"})

        async with anyio.create_task_group() as group:
            group.start_soon(late_update)
            with anyio.fail_after(60):
                await settle(stack, "corrected", 3.0)
            read_back_at = time.time()
        writes = _writes(stack, "corrected")
        assert len(writes) == 3, writes
        last = max(at for at, _, _ in writes if at is not None)
        assert read_back_at >= last + 3.0, f"read back {read_back_at - last:.3f} s after the last write"
