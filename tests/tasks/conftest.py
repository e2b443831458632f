"""Shared fixtures: the suite, and an embedded FHIR engine for end-to-end runs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from task_harness import UNAVAILABLE

from fae.tasks import load_suite


@pytest.fixture(scope="session")
def suite():
    return load_suite()


@pytest.fixture(scope="session")
def engine():
    if UNAVAILABLE:
        pytest.skip(UNAVAILABLE)
    from fae.fhir.engine import FhirEngine

    return FhirEngine()


@pytest.fixture(scope="session")
def render(suite):
    """Rendered variations, made once per session: render(task_id, variation)."""
    made = {}

    def rendered(task_id: str, variation: int):
        if (task_id, variation) not in made:
            made[task_id, variation] = suite[task_id].render(variation)
        return made[task_id, variation]

    return rendered
