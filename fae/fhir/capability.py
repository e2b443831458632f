"""The CapabilityStatement served at /metadata, generated from the spec data."""

from __future__ import annotations

import functools

from fae.fhir.spec import Spec
from fae.fhir.types import Resource

INTERACTIONS = [
    "read",
    "vread",
    "update",
    "patch",
    "delete",
    "history-instance",
    "history-type",
    "create",
    "search-type",
]


@functools.lru_cache(maxsize=4)
def _resources(spec: Spec) -> tuple[dict, ...]:
    out = []
    for rtype in sorted(spec.resource_types):
        params = [
            {"name": p.code, "definition": p.url, "type": p.type}
            for p in spec.search_params(rtype).values()
            if p.expression and p.type != "composite" and p.type != "special"
        ]
        out.append(
            {
                "type": rtype,
                "profile": f"http://hl7.org/fhir/StructureDefinition/{rtype}",
                "interaction": [{"code": code} for code in INTERACTIONS],
                "versioning": "versioned",
                "readHistory": True,
                "updateCreate": True,
                "conditionalCreate": True,
                "conditionalUpdate": True,
                "conditionalDelete": "single",
                "searchInclude": ["*"],
                "searchRevInclude": ["*"],
                "searchParam": params,
            }
        )
    return tuple(out)


def capability_statement(spec: Spec, base: str) -> Resource:
    return {
        "resourceType": "CapabilityStatement",
        "status": "active",
        "date": "2019-11-01",
        "kind": "instance",
        "software": {"name": "fae embedded FHIR server"},
        "implementation": {"description": "fae sandboxed FHIR R4 server", "url": base or "/"},
        "fhirVersion": spec.fhir_version,
        "format": ["application/fhir+json", "json"],
        "rest": [
            {
                "mode": "server",
                "resource": list(_resources(spec)),
                "interaction": [
                    {"code": "transaction"},
                    {"code": "batch"},
                    {"code": "history-system"},
                    {"code": "search-system"},
                ],
            }
        ],
    }
