"""Fold versus capture: the state the log's writes imply against the state the harness read back.

They must agree. A resource that differs means something changed the sandbox
without passing through the proxy (or a write the fold could not read), so the
run is marked ``state_drift`` with the differing resources, never ignored.

The harness writes its capture as ``json.dumps(resources, sort_keys=True)``, so
a capture that agrees with the fold is, byte for byte, the fold's resources in
that canonical JSON with the server's ``meta`` spliced in. ``Capture.check``
compares those bytes and parses the capture only when they differ.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any, overload

import msgspec

from fae.errors import ReplayDrift
from fae.replay.fold import FoldedState, parse_json
from fae.replay.source import RunLog
from fae.store import events as ev

# Server-made side records are not writes anyone sent: they are not part of the comparison.
IGNORED_TYPES = ("AuditEvent",)

_canonical_encoder = json.JSONEncoder(sort_keys=True)  # what json.dumps(value, sort_keys=True) writes


class _Head(msgspec.Struct, gc=False):
    """A captured resource's type, id and raw meta; the rest of it is skipped, not decoded."""

    resourceType: Any = None
    id: Any = None
    meta: msgspec.Raw = msgspec.Raw(b"")


_heads = msgspec.json.Decoder(list[_Head])
_NOT_READ = object()


def _canonical(resource: dict[str, Any]) -> tuple[bytes, bytes, bytes]:
    """(up to meta's value, after meta's value, without meta): the resource as the harness's json.dumps writes it.

    Keys sort as strings, so the keys before meta and those after it are each one sorted object: two calls of
    the C encoder, cut and joined, not two per key.
    """
    before = _canonical_encoder.encode({k: v for k, v in resource.items() if k < "meta"})
    after = _canonical_encoder.encode({k: v for k, v in resource.items() if k > "meta"})
    head = (before[:-1] + ", " if len(before) > 2 else "{") + '"meta": '
    tail = ", " + after[1:] if len(after) > 2 else "}"
    if len(before) == 2:
        without = after
    elif len(after) == 2:
        without = before
    else:
        without = before[:-1] + ", " + after[1:]
    return head.encode(), tail.encode(), without.encode()


class Capture(Sequence[dict[str, Any]]):
    """The harness's last state capture of a run: a sequence of resources, parsed only when one is asked for."""

    def __init__(self, run_id: str, seq: int, body: bytes):
        self.run_id, self.seq, self.body = run_id, seq, body
        self.matched: FoldedState | None = None  # the fold whose canonical JSON the body is
        self._versions: list[tuple[tuple[str, str], Any]] = []  # per entry: (type, id), meta.versionId
        self._metas: list[bytes] = []  # per entry of a matched capture: its meta's raw JSON (empty: no meta)
        self._resources: list[dict[str, Any]] | None = None
        self._by_key: Mapping[tuple[Any, Any], dict[str, Any]] | None = None
        try:
            self._head_list: list[_Head] | None = _heads.decode(body)
        except msgspec.DecodeError:
            self._head_list = None
            self._parse()

    def _parse(self) -> list[dict[str, Any]]:
        if self._resources is None:
            resources = parse_json(self.body)
            if not isinstance(resources, list):
                raise ReplayDrift("the state capture's body is missing or unreadable", run_id=self.run_id, seq=self.seq)
            self._resources = resources
        return self._resources

    def check(self, state: FoldedState | None) -> None:
        """Compare with a fold: equal bytes make the fold the capture's content, else parse (raising if unreadable)."""
        if self._resources is None and self.matched is None:
            if state is not None and self._matches(state):
                self.matched = state
            else:
                self._parse()

    def _matches(self, state: FoldedState) -> bool:
        assert self._head_list is not None
        canonical = state.seed_cache.setdefault("canonical", {})  # (type, id) -> _canonical of a seed resource
        history = state.history
        metas: dict[bytes, Any] = {}
        versions: list[tuple[tuple[str, str], Any]] = []
        raw_metas: list[bytes] = []
        parts: list[bytes] = []
        for head in self._head_list:
            kind, rid = head.resourceType, head.id
            if type(kind) is not str or type(rid) is not str:
                return False
            key = (kind, rid)
            pieces = None if key in history else canonical.get(key)
            if pieces is None:
                resource = state.read(kind, rid)
                if resource is None:
                    return False
                pieces = _canonical(resource)
                if key not in history:  # the seed's own resource, unwritten: the same bytes for every run
                    canonical[key] = pieces
            meta = bytes(head.meta)
            if meta:
                version = metas.get(meta, _NOT_READ)
                if version is _NOT_READ:
                    version = metas[meta] = _meta_version(meta)
                    if version is _NOT_READ:
                        return False
                parts.append(pieces[0] + meta + pieces[1])
            else:
                version = None
                parts.append(pieces[2])
            versions.append((key, version))
            raw_metas.append(meta)
        if b"[" + b", ".join(parts) + b"]" != self.body or len(set(key for key, _ in versions)) != len(versions):
            return False
        self._versions = versions
        self._metas = raw_metas
        return True

    def by_key(self) -> Mapping[tuple[Any, Any], dict[str, Any]]:
        """The resources by (type, id), a later duplicate winning; a matched capture's are made when asked for.

        Made once: every judge that asks reads the same mapping (and the same resources made from the fold).
        """
        if self._by_key is None:
            if self.matched is not None:
                self._by_key = _MatchedResources(self.matched, self._versions, self._metas)
            else:
                self._by_key = {(r.get("resourceType"), r.get("id")): r for r in self._parse()}
        return self._by_key

    def untouched(self) -> set[tuple[str, str]]:
        """(type, id) of what a matched capture holds exactly as seeded (no write before it); empty if unmatched."""
        if self.matched is None:
            return set()
        history = self.matched.history
        return {key for key, _ in self._versions if key not in history}

    def versions(self) -> list[tuple[tuple[str, str], Any]]:
        """Each entry's (type, id) and meta.versionId, in capture order (read from the fold it matched)."""
        return self._versions

    def __len__(self) -> int:
        return len(self._head_list) if self._resources is None and self._head_list is not None else len(self._parse())

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        return self._parse()[index]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self._parse())


class _MatchedResources(Mapping[tuple[Any, Any], dict[str, Any]]):
    """A matched capture's resources by (type, id): each is the fold's resource with the capture's own meta.

    The capture's bytes are that resource's canonical JSON, so this equals what parsing them gives (as a
    value: keys may come in another order), without parsing the whole capture for the few a judge reads.
    """

    def __init__(self, state: FoldedState, versions: list[tuple[tuple[str, str], Any]], metas: list[bytes]):
        self._state = state
        self._metas = {key: meta for (key, _), meta in zip(versions, metas, strict=True)}
        self._made: dict[tuple[Any, Any], dict[str, Any]] = {}

    def __getitem__(self, key: tuple[Any, Any]) -> dict[str, Any]:
        found = self._made.get(key)
        if found is None:
            meta = self._metas[key]
            resource = self._state.read(*key)
            assert resource is not None  # the capture matched: every entry is in the fold
            found = {k: v for k, v in resource.items() if k != "meta"}
            if meta:
                found["meta"] = msgspec.json.decode(meta)
            self._made[key] = found
        return found

    def __contains__(self, key: object) -> bool:
        return key in self._metas

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        return iter(self._metas)

    def __len__(self) -> int:
        return len(self._metas)


def _meta_version(meta: bytes) -> Any:
    """meta.versionId from a captured meta's raw JSON (None when meta is empty); _NOT_READ when it is not an object."""
    try:
        value = msgspec.json.decode(meta)
    except msgspec.DecodeError:
        return _NOT_READ
    if not value:
        return None
    return value.get("versionId") if isinstance(value, dict) else _NOT_READ


def read_capture(run: RunLog) -> Capture | None:
    """The run's last state capture, unparsed, or None when it has none (raises when its body is unreadable)."""
    captured = run.last(ev.StateCaptured)
    if captured is None:
        return None
    assert isinstance(captured.event, ev.StateCaptured)
    body = run.body(captured.event.state_blob)
    if not body:
        raise ReplayDrift("the state capture's body is missing or unreadable", run_id=run.run_id, seq=captured.seq)
    return Capture(run.run_id, captured.seq, body)


def capture_seq(run: RunLog) -> int | None:
    """The seq of the run's last state capture, or None when it has none."""
    captured = run.last(ev.StateCaptured)
    return None if captured is None else captured.seq


def captured_resources(run: RunLog) -> tuple[int, list[dict[str, Any]]] | None:
    """(seq, resources) of the run's last state capture, or None when it has none."""
    capture = read_capture(run)
    return None if capture is None else (capture.seq, list(capture))


def differing_elements(
    mine: Mapping[str, Any], theirs: Mapping[str, Any], within: Collection[str] | None = None
) -> list[str]:
    """The top-level elements (meta aside) whose values differ between two versions of a resource, sorted;
    ``within`` limits the comparison to those elements (a body returned in part)."""
    keys = set(mine) | set(theirs) if within is None else set(within)
    return sorted(k for k in keys if k != "meta" and mine.get(k) != theirs.get(k))


def _same_content(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Equal apart from meta (two shallow copies: the comparison then runs in C)."""
    return a is b or {**a, "meta": None} == {**b, "meta": None}


Difference = tuple[tuple[str, str], dict[str, Any]]
"""A resource's (type, id) with how fold and capture disagree on it, as ``state_drift`` sorts and lists them."""


def _version_differs(key: tuple[str, str], fold_version: str, capture_version: Any) -> Difference:
    """The capture holds the resource at another version than the fold (``state_drift`` and ``_version_drift``)."""
    ref = f"{key[0]}/{key[1]}"
    return key, {"ref": ref, "difference": "version", "fold_version": fold_version, "capture_version": capture_version}


def _only_in_fold(key: tuple[str, str], fold_version: str) -> Difference:
    """The fold holds a resource the capture lacks (``state_drift`` and ``_version_drift``)."""
    return key, {"ref": f"{key[0]}/{key[1]}", "difference": "only_in_fold", "fold_version": fold_version}


def state_drift(
    state: FoldedState, captured: Sequence[dict[str, Any]], ignored_types: tuple[str, ...] = IGNORED_TYPES
) -> list[dict[str, Any]]:
    """Every resource where fold and capture disagree, by reference, with what each side holds."""
    if isinstance(captured, Capture) and captured.matched is state:
        return _version_drift(state, captured, ignored_types)
    folded = {
        (r["resourceType"], r["id"]): r
        for t in state.resource_types()
        if t not in ignored_types
        for r in state.resources(t)
    }
    seen = {}
    for resource in captured:
        kind, rid = resource.get("resourceType"), resource.get("id")
        if kind in ignored_types or not isinstance(kind, str) or not isinstance(rid, str):
            continue
        seen[(kind, rid)] = resource
    found: list[Difference] = []
    for key, theirs in seen.items():
        mine = folded.pop(key, None)
        meta = theirs.get("meta") or {}
        capture_version = meta.get("versionId")
        if mine is None:
            found.append(
                (
                    key,
                    {"ref": f"{key[0]}/{key[1]}", "difference": "only_in_capture", "capture_version": capture_version},
                )
            )
            continue
        fold_version = state._current_version(mine)
        if not _same_content(mine, theirs):
            changed = differing_elements(mine, theirs)
            found.append(
                (
                    key,
                    {
                        "ref": f"{key[0]}/{key[1]}",
                        "difference": "content",
                        "elements": changed,
                        "fold_version": fold_version,
                        "capture_version": capture_version,
                    },
                )
            )
        elif capture_version is not None and str(capture_version) != fold_version:
            found.append(_version_differs(key, fold_version, capture_version))
    for key, mine in folded.items():  # what the capture lacks
        found.append(_only_in_fold(key, state._current_version(mine)))
    found.sort(key=lambda item: item[0])
    return [difference for _, difference in found]


def _version_drift(state: FoldedState, capture: Capture, ignored_types: tuple[str, ...]) -> list[dict[str, Any]]:
    """state_drift for a capture whose content is the fold's: only versions and what the capture lacks can differ."""
    found: list[Difference] = []
    seen = set()
    for key, capture_version in capture.versions():
        if key[0] in ignored_types:
            continue
        seen.add(key)
        if capture_version is not None:
            versions = state.history.get(key)
            fold_version = versions[-1].version_id if versions else "1"
            if str(capture_version) != fold_version:
                found.append(_version_differs(key, fold_version, capture_version))
    if sum(state.count(t) for t in state.resource_types() if t not in ignored_types) != len(seen):
        for kind in state.resource_types():
            if kind not in ignored_types:
                for mine in state.resources(kind):
                    key = (kind, mine["id"])
                    if key not in seen:
                        found.append(_only_in_fold(key, state._current_version(mine)))
    found.sort(key=lambda item: item[0])
    return [difference for _, difference in found]
