"""A real local LLM server on an ephemeral 127.0.0.1 port, with the booking plan registered."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fae.llm import LlmServer, PlanRegistry, create_app, entry_from_dict
from tests.llm.booking import BOOKING_PLAN, CREATED


@pytest.fixture(scope="module")
def registry() -> PlanRegistry:
    return PlanRegistry([entry_from_dict({"match": "book her first appointment", "plan": BOOKING_PLAN})])


@pytest.fixture(scope="module")
def llm_server(registry: PlanRegistry) -> Iterator[LlmServer]:
    app = create_app(registry, fault_delay_s=5.0, clock=lambda: CREATED)
    with LlmServer(app) as server:
        yield server
