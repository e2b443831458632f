"""The one view of FHIR state that validators read: live sandbox or folded event log alike."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Snapshot(Protocol):
    """Resources at one moment, by type and id (deleted ones are absent)."""

    def resource_types(self) -> list[str]:
        """The types that have at least one resource."""
        ...

    def resources(self, resource_type: str) -> list[dict[str, Any]]:
        """Current resources of one type, in id order."""
        ...

    def read(self, resource_type: str, resource_id: str) -> dict[str, Any] | None:
        """One resource, or None when it does not exist (or was deleted)."""
        ...


@runtime_checkable
class StateView(Snapshot, Protocol):
    """The final state of a run, with the seed it started from for diffing."""

    @property
    def seed(self) -> Snapshot:
        """The resources the sandbox was seeded with."""
        ...


def by_type_and_id(resources: Iterable[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """The resources as they are (neither copied nor checked), by their resourceType, then id; later duplicates win."""
    by_type: dict[str, dict[str, dict[str, Any]]] = {}
    for resource in resources:
        by_type.setdefault(resource["resourceType"], {})[resource["id"]] = resource
    return by_type


class ResourcesByType:
    """A Snapshot over resources kept by type then id: the dicts given, neither copied nor checked (the fold's
    state, a harness capture, and ``MemorySnapshot`` all read through it)."""

    def __init__(self, by_type: dict[str, dict[str, dict[str, Any]]]):
        self._by_type = by_type

    def resource_types(self) -> list[str]:
        return sorted(kind for kind, items in self._by_type.items() if items)

    def resources(self, resource_type: str) -> list[dict[str, Any]]:
        items = self._by_type.get(resource_type, {})
        return [items[rid] for rid in sorted(items)]

    def read(self, resource_type: str, resource_id: str) -> dict[str, Any] | None:
        return self._by_type.get(resource_type, {}).get(resource_id)

    def count(self, resource_type: str) -> int:
        return len(self._by_type.get(resource_type, ()))

    def all(self) -> list[dict[str, Any]]:
        """Every resource, by type then id."""
        return [r for kind in self.resource_types() for r in self.resources(kind)]


class MemorySnapshot(ResourcesByType):
    """A snapshot over plain resource dicts, each copied (shallowly) and checked to have a type and an id (validators
    only read); later duplicates of a type/id win."""

    def __init__(self, resources: Iterable[Mapping[str, Any]]):
        by_type: dict[str, dict[str, dict[str, Any]]] = {}
        for resource in resources:
            kind, rid = resource.get("resourceType"), resource.get("id")
            if not isinstance(kind, str) or not isinstance(rid, str):
                raise TypeError(f"a resource needs resourceType and id: {dict(resource)!r:.120}")
            by_type.setdefault(kind, {})[rid] = dict(resource)
        super().__init__(by_type)


class MemoryState(MemorySnapshot):
    """A StateView over plain lists: the final resources and the seed resources."""

    def __init__(self, final: Iterable[Mapping[str, Any]], seed: Iterable[Mapping[str, Any]]):
        super().__init__(final)
        self._seed = MemorySnapshot(seed)

    @property
    def seed(self) -> MemorySnapshot:
        return self._seed


def bundle_resources(bundle: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The resources carried by a Bundle's entries."""
    return [dict(e["resource"]) for e in bundle.get("entry", []) if "resource" in e]


def seeded_state(bundle: Mapping[str, Any]) -> MemoryState:
    """The state right after seeding: final equals seed (what a run that wrote nothing leaves)."""
    resources = bundle_resources(bundle)
    return MemoryState(resources, resources)


def final_state(final: Iterable[Mapping[str, Any]], seed_bundle: Mapping[str, Any]) -> MemoryState:
    """A run's StateView from its final resources (a sandbox's or a fold's) and the variation's seed."""
    return MemoryState(final, bundle_resources(seed_bundle))
