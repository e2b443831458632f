"""A corpus built from the StructureDefinitions: one minimal valid instance per resource type.

Every element with min >= 1 is filled with a value of its type (the first type
of a choice, the first code of a required value set, a reference to an allowed
target), recursively; an element that would be left empty gets an extension.
"""

from __future__ import annotations

from fae.fhir.spec import Element, Spec
from fae.fhir.validate import allowed_children

EXTENSION = [{"url": "http://example.org/fhir/StructureDefinition/corpus", "valueString": "x"}]
PRIMITIVES: dict[str, object] = {
    "boolean": True,
    "integer": 1,
    "positiveInt": 1,
    "unsignedInt": 0,
    "decimal": 1.5,
    "string": "text",
    "markdown": "text",
    "code": "code",
    "id": "a1",
    "uri": "http://example.org/u",
    "url": "http://example.org/u",
    "canonical": "http://example.org/c",
    "oid": "urn:oid:1.2.3",
    "uuid": "urn:uuid:c757873d-ec9a-4326-a141-556f43239520",
    "base64Binary": "QUJD",
    "date": "2020-01-01",
    "dateTime": "2020-01-01T00:00:00Z",
    "instant": "2020-01-01T00:00:00Z",
    "time": "10:00:00",
    "xhtml": '<div xmlns="http://www.w3.org/1999/xhtml">x</div>',
}


def _primitive(spec: Spec, element: Element, type_code: str) -> object:
    if type_code == "code" and element.binding_strength == "required" and element.value_set:
        codes = spec.value_set_codes(element.value_set)
        if codes:
            return min(codes)
    return PRIMITIVES[type_code]


def _value(spec: Spec, struct: str, element: Element, type_code: str, depth: int) -> object:
    if element.content_reference:
        return _filled(spec, struct, element.content_reference.lstrip("#"), depth + 1)
    if type_code == "Resource" or type_code in spec.resource_types:
        return {"resourceType": "Patient"}
    if spec.is_primitive(type_code):
        return _primitive(spec, element, type_code)
    if type_code == "Reference":
        target = next((t for t in element.targets if t in spec.resource_types), "Patient")
        return {"reference": f"{target}/x1"}
    if type_code in ("BackboneElement", "Element") and allowed_children(spec, struct, element.path):
        return _filled(spec, struct, element.path, depth + 1)
    return _filled(spec, type_code, type_code, depth + 1)


def _filled(spec: Spec, struct: str, path: str, depth: int, root: bool = False) -> dict:
    out: dict = {}
    done: set[str] = set()
    for key, (element, type_code) in allowed_children(spec, struct, path).items():
        if element.min < 1 or element.path in done or depth > 12:
            continue
        done.add(element.path)
        value = _value(spec, struct, element, type_code, depth)
        out[key] = [value] if element.repeats else value
    if not out and not root:  # a resource may be empty; an element needs a value or children
        out["extension"] = list(EXTENSION)
    return out


def minimal_instance(spec: Spec, resource_type: str) -> dict:
    """The smallest instance of a resource type that the StructureDefinition allows."""
    body = _filled(spec, resource_type, resource_type, 0, root=True)
    return {"resourceType": resource_type, **body}


def required_keys(spec: Spec, resource_type: str) -> list[str]:
    """Top-level keys the type requires (choice elements excluded)."""
    return [
        key
        for key, (element, _) in allowed_children(spec, resource_type, resource_type).items()
        if element.min >= 1 and not element.path.endswith("[x]")
    ]
