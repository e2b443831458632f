"""Fold versus capture: the state the log's writes imply against the state the harness read back.

They must agree. A resource that differs means something changed the sandbox
without passing through the proxy (or a write the fold could not read), so the
run is marked ``state_drift`` with the differing resources, never ignored.
"""

from __future__ import annotations

from typing import Any

from fae.errors import ReplayDrift
from fae.replay.fold import FoldedState, parse_json
from fae.replay.source import RunLog
from fae.store import events as ev

# Server-made side records are not writes anyone sent: they are not part of the comparison.
IGNORED_TYPES = ("AuditEvent",)


def _same_content(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Equal apart from meta (two shallow copies: the comparison then runs in C)."""
    return a is b or {**a, "meta": None} == {**b, "meta": None}


def captured_resources(run: RunLog) -> tuple[int, list[dict[str, Any]]] | None:
    """(seq, resources) of the run's last state capture, or None when it has none."""
    captured = run.last(ev.StateCaptured)
    if captured is None:
        return None
    assert isinstance(captured.event, ev.StateCaptured)
    resources = parse_json(run.body(captured.event.state_blob))
    if not isinstance(resources, list):
        raise ReplayDrift("the state capture's body is missing or unreadable", run_id=run.run_id, seq=captured.seq)
    return captured.seq, resources


def state_drift(state: FoldedState, captured: list[dict[str, Any]],
                ignored_types: tuple[str, ...] = IGNORED_TYPES) -> list[dict[str, Any]]:
    """Every resource where fold and capture disagree, by reference, with what each side holds."""
    folded = {(r["resourceType"], r["id"]): r for t in state.resource_types() if t not in ignored_types
              for r in state.resources(t)}
    seen = {}
    for resource in captured:
        kind, rid = resource.get("resourceType"), resource.get("id")
        if kind in ignored_types or not isinstance(kind, str) or not isinstance(rid, str):
            continue
        seen[(kind, rid)] = resource
    found: list[tuple[tuple[str, str], dict[str, Any]]] = []
    for key, theirs in seen.items():
        mine = folded.pop(key, None)
        meta = theirs.get("meta") or {}
        capture_version = meta.get("versionId")
        if mine is None:
            found.append((key, {"ref": f"{key[0]}/{key[1]}", "difference": "only_in_capture",
                                "capture_version": capture_version}))
            continue
        fold_version = state._current_version(mine)
        if not _same_content(mine, theirs):
            changed = sorted(k for k in set(mine) | set(theirs) if k != "meta" and mine.get(k) != theirs.get(k))
            found.append((key, {"ref": f"{key[0]}/{key[1]}", "difference": "content", "elements": changed,
                                "fold_version": fold_version, "capture_version": capture_version}))
        elif capture_version is not None and str(capture_version) != fold_version:
            found.append((key, {"ref": f"{key[0]}/{key[1]}", "difference": "version", "fold_version": fold_version,
                                "capture_version": capture_version}))
    for key, mine in folded.items():  # what the capture lacks
        found.append((key, {"ref": f"{key[0]}/{key[1]}", "difference": "only_in_fold",
                            "fold_version": state._current_version(mine)}))
    found.sort(key=lambda item: item[0])
    return [difference for _, difference in found]
