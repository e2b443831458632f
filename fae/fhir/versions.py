"""Versioned resource storage for one sandbox: current versions, full history, cheap copies.

Stored resource dicts are never mutated once stored, so a copy of a store shares
them: cloning or resetting a sandbox copies two small maps, not the resources.
"""

from __future__ import annotations

from typing import Any

from fae.fhir.types import Resource


class Version:
    """One version of a resource, or the tombstone a delete leaves (resource is None)."""

    __slots__ = ("resource_type", "id", "version_id", "last_updated", "resource", "method", "cache")

    def __init__(
        self, resource_type: str, id: str, version_id: str, last_updated: str, resource: Resource | None, method: str
    ):
        self.resource_type = resource_type
        self.id = id
        self.version_id = version_id
        self.last_updated = last_updated
        self.resource = resource
        self.method = method
        # search values extracted from this version, keyed by (param url, type); pure, so shareable
        self.cache: dict = {}

    @property
    def deleted(self) -> bool:
        return self.resource is None

    @property
    def live_resource(self) -> Resource:
        """The resource of a version that is not a tombstone; asking a tombstone is a programming error."""
        if self.resource is None:
            raise ValueError(f"{self.key} version {self.version_id} is a deletion and holds no resource")
        return self.resource

    @property
    def key(self) -> str:
        return f"{self.resource_type}/{self.id}"


class Store:
    """All versions of all resources in a sandbox, in the order they were written."""

    __slots__ = ("current", "versions", "history", "indexes")

    def __init__(self) -> None:
        self.current: dict[str, dict[str, Version]] = {}
        self.versions: dict[tuple[str, str], tuple[Version, ...]] = {}
        self.history: list[Version] = []
        # lookup indexes by type, then name (see fhir/conditional.py); each has `update(version)`,
        # called on every write, and a cheap copy-on-write `copy()`
        self.indexes: dict[str, dict[str, Any]] = {}

    def copy(self) -> Store:
        other = Store()
        other.current = {t: dict(m) for t, m in self.current.items()}
        other.versions = dict(self.versions)
        other.history = list(self.history)
        other.indexes = {t: {name: index.copy() for name, index in m.items()} for t, m in self.indexes.items()}
        return other

    def get(self, resource_type: str, id: str) -> Version | None:
        return self.current.get(resource_type, {}).get(id)

    def version(self, resource_type: str, id: str, version_id: str) -> Version | None:
        for v in self.versions.get((resource_type, id), ()):
            if v.version_id == version_id:
                return v
        return None

    def instance_history(self, resource_type: str, id: str) -> tuple[Version, ...]:
        return self.versions.get((resource_type, id), ())

    def put(self, version: Version) -> None:
        self.current.setdefault(version.resource_type, {})[version.id] = version
        key = (version.resource_type, version.id)
        self.versions[key] = self.versions.get(key, ()) + (version,)
        self.history.append(version)
        for index in self.indexes.get(version.resource_type, {}).values():
            index.update(version)

    def live(self, resource_type: str) -> list[Version]:
        return [v for v in self.current.get(resource_type, {}).values() if v.resource is not None]

    def types(self) -> list[str]:
        return list(self.current)


def next_version(store: Store, rtype: str, rid: str) -> str:
    """The version id the next write of a resource gets: one past the last numeric one."""
    history = store.instance_history(rtype, rid)
    if not history:
        return "1"
    last = history[-1].version_id
    return str(int(last) + 1) if last.isascii() and last.isdigit() else str(len(history) + 1)


def put_resource(store: Store, resource: Resource, method: str, now: str, keep_meta: bool = False) -> Version:
    """Store a resource as its next version, stamping meta.versionId and meta.lastUpdated."""
    rtype, rid = resource["resourceType"], resource["id"]
    meta = dict(resource.get("meta") or {})
    if not (keep_meta and meta.get("versionId")):
        meta["versionId"] = next_version(store, rtype, rid)
    if not (keep_meta and meta.get("lastUpdated")):
        meta["lastUpdated"] = now
    rest = {k: v for k, v in resource.items() if k not in ("resourceType", "id", "meta")}
    resource = {"resourceType": rtype, "id": rid, "meta": meta, **rest}
    version = Version(rtype, rid, str(meta["versionId"]), meta["lastUpdated"], resource, method)
    store.put(version)
    return version
