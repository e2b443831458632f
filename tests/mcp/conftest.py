"""Fixtures for the MCP tests: a FHIR stand-in on real HTTP."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fhir_standin import StandinFhir, serve


@pytest.fixture(scope="module")
def standin() -> Iterator[tuple[str, StandinFhir]]:
    """A running FHIR stand-in: its origin (``http://127.0.0.1:P``) and the object holding its state."""
    fhir = StandinFhir()
    with serve(fhir.app) as origin:
        yield origin, fhir
