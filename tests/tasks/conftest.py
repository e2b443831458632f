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
