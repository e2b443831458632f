"""Every resource type: a minimal instance built from its StructureDefinition validates (must pass),
and the same instance without a required element, or with an unknown one, is refused (must fail)."""

from __future__ import annotations

import json

import pytest

from fae.fhir.spec import load_spec
from fae.fhir.validate import validate_resource
from tests.fhir.corpus import minimal_instance, required_keys

SPEC = load_spec()
TYPES = sorted(SPEC.resource_types)


def test_corpus_covers_every_resource_type():
    assert len(TYPES) >= 140


@pytest.mark.parametrize("rtype", TYPES)
def test_minimal_instance_is_accepted(engine, rtype):
    resource = minimal_instance(SPEC, rtype)
    problems = validate_resource(SPEC, resource)
    assert problems == [], f"{json.dumps(resource)[:400]}: {problems[:3]}"
    sid = engine.create_sandbox()
    resp = engine.handle(sid, "POST", rtype, body=json.dumps(resource).encode())
    assert resp.status == 201, resp.body[:400]


@pytest.mark.parametrize("rtype", TYPES)
def test_broken_instance_is_refused(rtype):
    resource = minimal_instance(SPEC, rtype)
    required = [k for k in required_keys(SPEC, rtype) if k in resource]
    if required:
        del resource[required[0]]
        expected = f"{rtype}.{required[0]}"
    else:
        resource["notAnElement"] = "x"
        expected = f"{rtype}.notAnElement"
    problems = validate_resource(SPEC, resource)
    assert any(expected in p.get("expression", [""])[0] for p in problems), problems[:3]
