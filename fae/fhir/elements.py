"""Which R4 element a JSON path of a resource is: its definitions along the way, its datatype, whether it modifies.

A path is the JSON keys from the resource down (``condition.onsetAge.unit``, no list
indices). Choice elements are named as in JSON (``onsetAge`` is ``onset[x]`` as Age),
nested backbone elements are followed inside their resource, a ``contentReference``
(``Consent.provision.provision``) goes back to the element it names, and a complex
datatype's own elements (``Age.unit``) are read from the datatype's definition.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from fae.fhir.spec import Element, load_spec


@dataclass(frozen=True, slots=True)
class Located:
    """The definitions a path passes through, outermost first, and the datatype it ends in."""

    trail: tuple[Element, ...]
    datatype: str | None
    """The type of the last element (``CodeableConcept``, ``code``; None when it is a backbone element)."""

    @property
    def modifier(self) -> bool:
        """Whether any element on the way is a modifier (``isModifier``): the path can change what the resource
        means."""
        return any(element.modifier for element in self.trail)


def _child(type_name: str, parent: str, key: str) -> tuple[Element, str | None] | None:
    """The element ``key`` under ``parent`` in the structure ``type_name``, and the choice type it picks."""
    elements = load_spec().elements(type_name)
    found = elements.get(f"{parent}.{key}")
    if found is not None:
        return found, None
    for element in elements.values():
        stem = element.path.removeprefix(parent + ".")
        if stem.endswith("[x]") and "." not in stem and key.startswith(stem[:-3]):
            chosen = key[len(stem) - 3 :]
            for type_code in element.types:
                if type_code[:1].upper() + type_code[1:] == chosen:
                    return element, type_code
    return None


@lru_cache(maxsize=4096)
def locate(resource_type: str, keys: Sequence[str]) -> Located | None:
    """The element a resource's JSON path names, or None when R4 has no such element."""
    spec = load_spec()
    structure, parent = resource_type, resource_type
    trail: list[Element] = []
    datatype: str | None = None
    for key in keys:
        if datatype is not None:  # step into a complex datatype's own definition
            structure, parent = datatype, datatype
        found = _child(structure, parent, key)
        if found is None:
            return None
        element, choice = found
        trail.append(element)
        if element.content_reference:
            parent = element.content_reference.lstrip("#")
            datatype = None
            continue
        own_children = any(p.startswith(element.path + ".") for p in spec.elements(structure))
        types = (choice,) if choice else element.types
        if own_children and (not types or types[0] in ("BackboneElement", "Element")):
            parent, datatype = element.path, None
        elif len(types) == 1:
            datatype = types[0]
            if spec.is_primitive(datatype) or spec.structure(datatype) is None:
                parent = element.path  # nothing below a primitive but its id and extensions
        else:
            return None
    return Located(tuple(trail), datatype)
