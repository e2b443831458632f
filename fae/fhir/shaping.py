"""Response shaping for search: `_summary` and `_elements` subsets of a resource."""

from __future__ import annotations

from fae.fhir.outcome import FhirProblem
from fae.fhir.spec import Spec
from fae.fhir.types import Resource

SUBSETTED = {"system": "http://terminology.hl7.org/CodeSystem/v3-ObservationValue", "code": "SUBSETTED"}
SUMMARY_MODES = {"true", "false", "text", "data", "count"}


def _mark_subsetted(resource: Resource) -> Resource:
    meta = dict(resource.get("meta") or {})
    meta["tag"] = list(meta.get("tag") or []) + [dict(SUBSETTED)]
    resource["meta"] = meta
    return resource


def _top_level(spec: Spec, rtype: str) -> dict[str, tuple[bool, bool]]:
    """JSON key -> (in summary, mandatory) for the top-level elements of a resource."""
    out = {}
    for path, element in spec.elements(rtype).items():
        parts = path.split(".")
        if len(parts) != 2:
            continue
        name = parts[1]
        keys = [name[:-3] + t[:1].upper() + t[1:] for t in element.types] if name.endswith("[x]") else [name]
        for key in keys:
            out[key] = (element.summary, element.min >= 1)
    return out


def summarise(spec: Spec, resource: Resource, mode: str) -> Resource:
    if mode == "false":
        return resource
    if mode == "data":
        return _mark_subsetted({k: v for k, v in resource.items() if k != "text"})
    keep = {"resourceType", "id", "meta"}
    elements = _top_level(spec, resource["resourceType"])
    if mode == "text":
        keep |= {"text"} | {k for k, (_, mandatory) in elements.items() if mandatory}
    else:
        keep |= {k for k, (summary, mandatory) in elements.items() if summary or mandatory}
    return _mark_subsetted({k: v for k, v in resource.items() if k in keep})


def select_elements(spec: Spec, resource: Resource, names: list[str]) -> Resource:
    """`_elements`: the named top-level elements plus id, meta and the mandatory ones, marked SUBSETTED."""
    mandatory = {k for k, (_, required) in _top_level(spec, resource["resourceType"]).items() if required}
    keep = {"resourceType", "id", "meta"} | mandatory | {n.split(".", 1)[-1] for n in names}
    return _mark_subsetted({k: v for k, v in resource.items() if k in keep})


def summary_mode(pairs: list[tuple[str, str]]) -> str | None:
    values = [v for k, v in pairs if k == "_summary"]
    if not values:
        return None
    if values[-1] not in SUMMARY_MODES:
        raise FhirProblem(
            400, f"_summary must be one of {', '.join(sorted(SUMMARY_MODES))}", code="value", expression="_summary"
        )
    return values[-1]
