"""The FHIR R4 (4.0.1) definitions the server runs on, loaded once from the committed data file.

The file is built by scripts/build_fhir_spec.py from the official HL7 bundles. It
holds element definitions for resources and datatypes, the official
SearchParameters and the enumerable value sets bound as required to `code`
elements. The specs MCP server serves the same data.
"""

from __future__ import annotations

import functools
import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path

from fae.fhir.types import Resource

DATA_FILE = Path(__file__).parent / "data" / "fhir-r4-spec.json.gz"
SUPPORTED_FORMAT = 1


@dataclass(frozen=True, slots=True)
class SearchParam:
    """One official SearchParameter, as it applies to one resource type."""

    code: str
    type: str
    expression: str | None
    targets: tuple[str, ...]
    url: str
    base: tuple[str, ...]
    description: str = ""
    components: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Element:
    """One element of a structure: path, cardinality, types and binding."""

    path: str
    min: int
    max: str
    types: tuple[str, ...]
    targets: tuple[str, ...]
    content_reference: str | None
    binding_strength: str | None
    value_set: str | None
    summary: bool
    short: str
    modifier: bool = False
    """``isModifier`` in the definition: the element can change the meaning of the resource it is in."""

    @property
    def repeats(self) -> bool:
        return self.max != "1" and self.max != "0"


@dataclass(slots=True, eq=False)
class Spec:
    """The loaded definitions, with per-type indexes built on first use."""

    raw: dict
    resource_types: frozenset[str]
    _params: dict[str, dict[str, SearchParam]] = field(default_factory=dict)
    _elements: dict[str, dict[str, Element]] = field(default_factory=dict)

    @property
    def fhir_version(self) -> str:
        return self.raw["fhirVersion"]

    def structure(self, name: str) -> Resource | None:
        return self.raw["structures"].get(name)

    def is_primitive(self, type_name: str) -> bool:
        s = self.raw["structures"].get(type_name)
        return s is not None and s["kind"] == "primitive-type"

    def primitive_regex(self, type_name: str) -> str | None:
        s = self.raw["structures"].get(type_name)
        return s.get("regex") if s else None

    def elements(self, type_name: str) -> dict[str, Element]:
        """Elements of a resource or datatype keyed by path (e.g. 'Patient.name')."""
        cached = self._elements.get(type_name)
        if cached is not None:
            return cached
        s = self.raw["structures"].get(type_name)
        out: dict[str, Element] = {}
        for e in s["elements"] if s else ():
            binding = e.get("binding") or {}
            types = e.get("types", [])
            out[e["path"]] = Element(
                path=e["path"],
                min=e["min"],
                max=e["max"],
                types=tuple(t["code"] for t in types),
                targets=tuple(x for t in types for x in t.get("targets", ())),
                content_reference=e.get("contentReference"),
                binding_strength=binding.get("strength"),
                value_set=binding.get("valueSet"),
                summary=e.get("summary", False),
                short=e.get("short", ""),
                modifier=e.get("modifier", False),
            )
        self._elements[type_name] = out
        return out

    def value_set_codes(self, url: str) -> frozenset[str] | None:
        codes = self.raw["valueSets"].get(url)
        return frozenset(codes) if codes is not None else None

    def search_params(self, resource_type: str) -> dict[str, SearchParam]:
        """Search parameters that apply to a resource type, keyed by code."""
        cached = self._params.get(resource_type)
        if cached is not None:
            return cached
        bases = {resource_type, "Resource"}
        if resource_type not in ("Bundle", "Binary", "Parameters"):
            bases.add("DomainResource")
        out: dict[str, SearchParam] = {}
        for sp in self.raw["searchParameters"]:
            if not bases.intersection(sp["base"]):
                continue
            if sp["code"] in out and resource_type not in sp["base"]:
                continue
            out[sp["code"]] = SearchParam(
                code=sp["code"],
                type=sp["type"],
                expression=sp.get("expression"),
                targets=tuple(sp.get("target", ())),
                url=sp["url"],
                base=tuple(sp["base"]),
                description=sp.get("description", ""),
                components=tuple((c["definition"], c["expression"]) for c in sp.get("component", ())),
            )
        self._params[resource_type] = out
        return out


@functools.cache
def load_spec(path: Path = DATA_FILE) -> Spec:
    """Read the data file once per process; later engines share it."""
    raw = json.loads(gzip.decompress(path.read_bytes()))
    if raw.get("format") != SUPPORTED_FORMAT:
        raise ValueError(f"{path}: spec data format {raw.get('format')!r}, expected {SUPPORTED_FORMAT}")
    return Spec(raw=raw, resource_types=frozenset(raw["resourceTypes"]))
