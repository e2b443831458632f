"""Validation of resources against the official StructureDefinitions.

Checks unknown elements, JSON types of primitives (lexical checks in `primitives`),
cardinality, required bindings of `code` elements where the value set is
enumerable, id format and reference format and target types. Every issue names
the offending element in `expression`, FHIRPath style (`Patient.name[0].given`).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from fae.fhir.outcome import issue
from fae.fhir.primitives import valid_text
from fae.fhir.references import (
    ID_RE,
    is_absolute,
    is_conditional_reference,
    is_well_formed,
    parse_reference,
)
from fae.fhir.spec import Element, Spec

MAX_ISSUES = 25
MAX_DEPTH = 40
INTEGER_TYPES = {"integer", "positiveInt", "unsignedInt"}
INT_MIN, INT_MAX = -(2**31), 2**31 - 1


def _capitalise(type_code: str) -> str:
    return type_code[:1].upper() + type_code[1:]


# allowed children per (structure, path), shared by all validations against one loaded spec
_CHILDREN: dict[int, dict[tuple[str, str], dict[str, tuple[Element, str]]]] = {}


class _Validator:
    def __init__(self, spec: Spec):
        self.spec = spec
        self.issues: list[dict] = []
        self._children_cache = _CHILDREN.setdefault(id(spec), {})

    def add(self, expression: str, message: str, code: str = "structure") -> None:
        if len(self.issues) < MAX_ISSUES:
            self.issues.append(issue("error", code, message, expression))

    def children(self, struct: str, path: str) -> dict[str, tuple[Element, str]]:
        """JSON keys allowed under `path` in `struct`, mapped to (element, concrete type)."""
        key = (struct, path)
        cached = self._children_cache.get(key)
        if cached is not None:
            return cached
        out: dict[str, tuple[Element, str]] = {}
        prefix = path + "."
        for epath, element in self.spec.elements(struct).items():
            if not epath.startswith(prefix) or "." in epath[len(prefix) :]:
                continue
            name = epath[len(prefix) :]
            if name.endswith("[x]"):
                stem = name[:-3]
                for t in element.types:
                    out[stem + _capitalise(t)] = (element, t)
            else:
                out[name] = (element, element.types[0] if element.types else "")
        self._children_cache[key] = out
        return out

    def resource(self, value: object, expr: str, depth: int = 0) -> None:
        if not isinstance(value, dict):
            self.add(expr, "A resource must be a JSON object")
            return
        rtype = value.get("resourceType")
        if not isinstance(rtype, str) or rtype not in self.spec.resource_types:
            self.add(expr or "resourceType", f"Unknown resource type {rtype!r}", "not-supported")
            return
        rid = value.get("id")
        if rid is not None and (not isinstance(rid, str) or not ID_RE.match(rid)):
            self.add(f"{expr or rtype}.id", f"Invalid id {str(rid)[:70]!r}: 1-64 of A-Z a-z 0-9 - .", "value")
        self.complex(value, rtype, rtype, expr or rtype, depth + 1, is_resource=True)

    def complex(self, value: dict, struct: str, path: str, expr: str, depth: int, is_resource: bool = False) -> None:
        if depth > MAX_DEPTH:
            self.add(expr, "Content nested too deeply")
            return
        allowed = self.children(struct, path)
        if not value or (is_resource and len(value) == 1):
            if not is_resource:
                self.add(expr, "Elements must have a value or children")
        for key, item in value.items():
            if is_resource and key == "resourceType":
                continue
            if key.startswith("_") and key[1:] in allowed:
                continue
            found = allowed.get(key)
            if found is None:
                self.add(f"{expr}.{key}", f"Unknown element '{key}' in {path}")
                continue
            element, type_code = found
            self.element(item, element, type_code, struct, f"{expr}.{key}", depth)
        for key, (element, _) in allowed.items():
            if element.min >= 1 and not element.path.endswith("[x]"):
                if key not in value and "_" + key not in value:
                    self.add(f"{expr}.{key}", f"Missing required element '{key}' (min {element.min})", "required")
        for element in {e for e, _ in allowed.values() if e.min >= 1 and e.path.endswith("[x]")}:
            stem = element.path.rsplit(".", 1)[1][:-3]
            if not any(k.startswith(stem) and allowed.get(k, (None,))[0] is element for k in value):
                self.add(f"{expr}.{stem}[x]", f"Missing required element '{stem}[x]'", "required")

    def element(self, item: object, element: Element, type_code: str, struct: str, expr: str, depth: int) -> None:
        if element.repeats:
            if not isinstance(item, list):
                self.add(expr, f"Element repeats (max {element.max}); expected a JSON array")
                return
            if not item:
                self.add(expr, "Arrays must not be empty")
            if element.max.isdigit() and len(item) > int(element.max):
                self.add(expr, f"At most {element.max} allowed, found {len(item)}", "structure")
            for i, one in enumerate(item):
                self.single(one, element, type_code, struct, f"{expr}[{i}]", depth)
        elif isinstance(item, list):
            self.add(expr, "Element does not repeat (max 1); expected a single value, not an array")
        else:
            self.single(item, element, type_code, struct, expr, depth)

    def single(self, item: object, element: Element, type_code: str, struct: str, expr: str, depth: int) -> None:
        if element.content_reference:
            target = element.content_reference.lstrip("#")
            if isinstance(item, dict):
                self.complex(item, struct, target, expr, depth + 1)
            else:
                self.add(expr, "Expected a JSON object")
            return
        if type_code == "Resource" or type_code in self.spec.resource_types:
            # R4 types Bundle.entry.response.outcome and contained as Resource: any resource will do
            self.resource(item, expr, depth + 1)
            return
        if self.spec.is_primitive(type_code):
            self.primitive(item, element, type_code, expr)
            return
        if not isinstance(item, dict):
            self.add(expr, f"Expected a JSON object ({type_code})")
            return
        if type_code in ("BackboneElement", "Element") and self.children(struct, element.path):
            self.complex(item, struct, element.path, expr, depth + 1)
            return
        self.complex(item, type_code, type_code, expr, depth + 1)
        if type_code == "Reference":
            self.reference(item, element, expr)

    def primitive(self, item: object, element: Element, type_code: str, expr: str) -> None:
        if type_code == "boolean":
            ok = isinstance(item, bool)
        elif type_code in INTEGER_TYPES:
            lowest = {"positiveInt": 1, "unsignedInt": 0}.get(type_code, INT_MIN)
            ok = isinstance(item, int) and not isinstance(item, bool) and lowest <= item <= INT_MAX
        elif type_code == "decimal":
            ok = isinstance(item, (int, float)) and not isinstance(item, bool)
            if ok and isinstance(item, float):
                ok = Decimal(repr(item)).is_finite()
        else:
            ok = isinstance(item, str) and (type_code == "xhtml" or valid_text(type_code, item))
        if not ok:
            self.add(expr, f"Invalid {type_code} value {str(item)[:60]!r}", "value")
            return
        if type_code == "code" and element.binding_strength == "required" and element.value_set:
            codes = self.spec.value_set_codes(element.value_set)
            if codes is not None and item not in codes:
                shown = ", ".join(sorted(codes)[:12])
                self.add(
                    expr,
                    f"Code {item!r} is not in the required value set {element.value_set} "
                    f"({shown}{', ...' if len(codes) > 12 else ''})",
                    "code-invalid",
                )

    def reference(self, item: dict, element: Element, expr: str) -> None:
        ref = item.get("reference")
        if not isinstance(ref, str):
            return
        if is_conditional_reference(ref):
            self.add(
                f"{expr}.reference",
                f"Malformed reference {ref[:80]!r}: a conditional reference "
                "(Type?query) is resolved only inside a transaction Bundle",
                "value",
            )
            return
        if not is_well_formed(ref):
            self.add(
                f"{expr}.reference",
                f"Malformed reference {ref[:80]!r}: expected Type/id, an absolute URL, #id or urn:uuid:...",
                "value",
            )
            return
        parsed = parse_reference(ref) if not ref.startswith(("#", "urn:")) else None
        if parsed is None:
            return
        if parsed[0] not in self.spec.resource_types:
            if is_absolute(ref):
                return  # an absolute URL may name another server's types (e.g. .../Network/x)
            self.add(f"{expr}.reference", f"Reference to unknown resource type {parsed[0]!r}", "value")
            return
        targets = element.targets
        if targets and "Resource" not in targets and parsed[0] not in targets:
            self.add(
                f"{expr}.reference",
                f"Reference to {parsed[0]} not allowed here; allowed: {', '.join(targets)}",
                "value",
            )


def validate_resource(spec: Spec, resource: object) -> list[dict[str, Any]]:
    """OperationOutcome issues for a resource; empty when it conforms."""
    validator = _Validator(spec)
    validator.resource(resource, "")
    return validator.issues


def element_at(spec: Spec, resource_type: str, keys: list[str]) -> Element | None:
    """The definition of the element a chain of JSON keys leads to (`["name", "given"]`), or None."""
    validator = _Validator(spec)
    struct, path, element = resource_type, resource_type, None
    for key in keys:
        found = validator.children(struct, path).get(key)
        if found is None:
            return None
        element, type_code = found
        if element.content_reference:
            path = element.content_reference.lstrip("#")
        elif type_code in ("BackboneElement", "Element") and validator.children(struct, element.path):
            path = element.path
        else:
            struct, path = type_code, type_code
    return element


def allowed_children(spec: Spec, struct: str, path: str) -> dict[str, tuple[Element, str]]:
    """JSON keys allowed under `path` in `struct`, mapped to (element, concrete type)."""
    return _Validator(spec).children(struct, path)
